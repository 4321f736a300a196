"""A scripted model behind the OpenAI Agents SDK's ``Model`` interface (no network).

It asks for one refund; once it sees the tool's output, it answers with what the tool said.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

CALL_ID = "call_refund_1"


class RefundModel(Model):
    async def get_response(self, system_instructions: str | None, input: Any,
                           model_settings: Any, tools: Any, output_schema: Any, handoffs: Any,
                           tracing: Any, *, previous_response_id: str | None = None,
                           conversation_id: str | None = None,
                           prompt: Any = None, **_: Any) -> ModelResponse:
        items = input if isinstance(input, list) else []
        outputs = [i for i in items if isinstance(i, dict)
                   and i.get("type") == "function_call_output"]
        if outputs:
            text = ResponseOutputText(annotations=[], text=f"tool said: {outputs[-1]['output']}",
                                      type="output_text")
            out: Any = ResponseOutputMessage(id="msg_1", content=[text], role="assistant",
                                             status="completed", type="message")
        else:
            out = ResponseFunctionToolCall(
                arguments=json.dumps({"order_id": "A-1", "amount": 40.0}), call_id=CALL_ID,
                name="refund_order", type="function_call", id="fc_1", status="completed")
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests never stream")
