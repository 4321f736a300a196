"""A Pydantic AI agent whose refund tool is approved in signoff (signoff-client[pydantic-ai]).

The agent pauses the Pydantic AI way (a deferred tool, ``DeferredToolRequests``); the gate
turns the pause into a signoff card and stores the message history in ``./paused/``, so the
process exits while it waits and ``examples/worker.py``'s resume worker resumes the agent once
a person decides. Run it against the sandbox as ``examples/external_refunds.py`` says (same
key), with::

    export SIGNOFF_URL=http://127.0.0.1:3000 SIGNOFF_API_KEY=so_...
    .venv/bin/python -m examples.external_pydantic_ai    # pauses, prints the run, exits
    .venv/bin/signoff-worker examples.worker:worker      # resumes it once the card is decided

It calls only ``gate.start``: ``gate.run`` here would resume the pause in this process while the
worker, which watches ``./paused/``, resumes it too (the model and the ungated tools would
run twice).

The model is scripted (``FunctionModel``: ask for one refund, then report what the tool
said) so the example needs no model API; put any Pydantic AI model in its place.
"""

from __future__ import annotations

import asyncio

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
from signoff_client.adapters.pauses import FilePauses
from signoff_client.adapters.pydantic_ai import PydanticAIGate

from examples.external_refunds import (
    PROMPT,
    check_refund,
    find_refund,
    refund_order,
    render_refund,
    start_for_worker,
)


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
    gate, agent = build()
    await start_for_worker("pydantic_ai", lambda run: gate.start(agent, run, PROMPT),
                           answer=lambda result: str(result.output))


if __name__ == "__main__":
    asyncio.run(main())
