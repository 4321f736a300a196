"""A Pydantic AI agent whose refund tool is approved in signoff (signoff-client[pydantic-ai]).

The agent pauses the Pydantic AI way (a deferred tool, ``DeferredToolRequests``); the gate
turns the pause into a signoff card and stores the message history in ``./paused/``, so the
process may exit while it waits. Run it against the sandbox as ``examples/external_refunds.py``
says (same key), with::

    SIGNOFF_API_KEY=so_... .venv/bin/python -m examples.external_pydantic_ai

The model is scripted (``FunctionModel``: ask for one refund, then report what the tool
said) so the example needs no model API; put any Pydantic AI model in its place.
``examples/worker.py`` runs the same agent with a resume worker, so nothing waits here.
"""

from __future__ import annotations

import asyncio
import os

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from signoff_client import Signoff
from signoff_client.adapters.pauses import FilePauses
from signoff_client.adapters.pydantic_ai import PydanticAIGate

from examples.external_refunds import check_refund, find_refund, refund_order, render_refund


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"Refund tool: {part.content}")])
    return ModelResponse(parts=[ToolCallPart("refund_order", {"order_id": "A-1", "amount": 40.0})])


def build() -> tuple[PydanticAIGate[None], Agent[None, str | DeferredToolRequests]]:
    gate: PydanticAIGate[None] = PydanticAIGate(FilePauses("paused"), name="refunds-pydantic-ai")
    gate.tool(preview=render_refund, guard=check_refund, reconcile=find_refund)(refund_order)
    agent = Agent(FunctionModel(scripted), toolsets=[gate.toolset],
                  output_type=[str, DeferredToolRequests])
    return gate, agent


async def main() -> None:
    url = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:3000")
    gate, agent = build()
    async with Signoff(url, api_key=os.environ["SIGNOFF_API_KEY"]) as so, so.run(
            requester=os.environ.get("SIGNOFF_REQUESTER", "U0RILEY"),
            title="Refund for ticket 4411 (Pydantic AI)", idempotency_key="pai-ticket-4411",
            requires=["refund_order"]) as run:
        result = await gate.run(agent, run, "Refund order A-1 in full.")
        run.answer = str(result.output)
        print(run.answer)


if __name__ == "__main__":
    asyncio.run(main())
