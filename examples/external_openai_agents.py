"""An OpenAI Agents SDK agent whose refund tool is approved in signoff
(signoff-client[openai-agents]).

The tool has ``needs_approval``; the gate turns the run's interruptions into signoff cards and
stores ``RunState.to_json()`` in ``./paused/``, so the process may exit while it waits. Run it
against the sandbox as ``examples/external_refunds.py`` says (same key), with::

    SIGNOFF_URL=http://127.0.0.1:<bot port> SIGNOFF_API_KEY=so_... \\
        .venv/bin/python -m examples.external_openai_agents

The model is scripted (a ``Model`` that asks for one refund, then reports what the tool
said), so the example needs no OpenAI key and sends nothing out; put any model in its place.
``examples/worker.py`` runs the same agent with a resume worker, so nothing waits here.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import agents
from agents import Agent, Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from signoff_client import Signoff
from signoff_client.adapters.openai_agents import OpenAIAgentsGate
from signoff_client.adapters.pauses import FilePauses

from examples.external_refunds import check_refund, find_refund, refund_order, render_refund


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
    url = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:3000")
    async with Signoff(url, api_key=os.environ["SIGNOFF_API_KEY"]) as so, so.run(
            requester=os.environ.get("SIGNOFF_REQUESTER", "U0RILEY"),
            title="Refund for ticket 4411 (Agents SDK)", idempotency_key="oai-ticket-4411",
            requires=["refund_order"]) as run:
        result = await gate.run(agent, run, "Refund order A-1 in full.")
        run.answer = str(result.final_output)
        print(run.answer)


if __name__ == "__main__":
    asyncio.run(main())
