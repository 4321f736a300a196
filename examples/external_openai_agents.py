"""An OpenAI Agents SDK agent whose refund tool is approved in signoff
(signoff-client[openai-agents]).

The tool has ``needs_approval``; the gate turns the run's interruptions into signoff cards and
stores ``RunState.to_json()`` in ``./paused/``, so the process exits while it waits and
``examples/worker.py``'s resume worker resumes the agent once a person decides. Run it against
the sandbox as ``examples/external_refunds.py`` says (same key), with::

    export SIGNOFF_URL=http://127.0.0.1:<bot port> SIGNOFF_API_KEY=so_...
    .venv/bin/python -m examples.external_openai_agents   # pauses, prints the run, exits
    .venv/bin/signoff-worker examples.worker:worker      # resumes it once the card is decided

It calls only ``gate.start``: ``gate.run`` here would resume the pause in this process while the
worker, which watches ``./paused/``, resumes it too (the model and the ungated tools would
run twice).

The model is scripted (a ``Model`` that asks for one refund, then reports what the tool
said), so the example needs no OpenAI key and sends nothing out; put any model in its place.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import agents
from agents import Agent, Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from signoff_client.adapters.openai_agents import OpenAIAgentsGate
from signoff_client.adapters.pauses import FilePauses

from examples.external_refunds import (
    PROMPT,
    check_refund,
    find_refund,
    refund_order,
    render_refund,
    start_for_worker,
)


class ScriptedModel(Model):
    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        items = input if isinstance(input, list) else []
        done = [i for i in items if isinstance(i, dict)
                and i.get("type") == "function_call_output"]
        if done:
            text = ResponseOutputText(annotations=[], type="output_text",
                                      text=f"Refund tool: {done[-1]['output']}")
            out: Any = ResponseOutputMessage(id="msg_1", content=[text], role="assistant",
                                             status="completed", type="message")
        else:
            out = ResponseFunctionToolCall(
                arguments=json.dumps({"order_id": "A-1", "amount": 40.0}), call_id="call_1",
                name="refund_order", type="function_call", id="fc_1", status="completed")
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def build() -> tuple[OpenAIAgentsGate, Agent[Any]]:
    agents.set_tracing_disabled(True)
    gate = OpenAIAgentsGate(FilePauses("paused"), name="refunds-openai-agents")
    refund = gate.tool(preview=render_refund, guard=check_refund,
                       reconcile=find_refund)(refund_order)
    return gate, Agent(name="refunds", model=ScriptedModel(), tools=[refund])


async def main() -> None:
    gate, agent = build()
    await start_for_worker("openai_agents", lambda run: gate.start(agent, run, PROMPT),
                           answer=lambda result: str(result.final_output))


if __name__ == "__main__":
    asyncio.run(main())
