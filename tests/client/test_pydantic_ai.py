"""The Pydantic AI adapter with the real library and its FunctionModel, against `signoff serve`.

The model asks for one refund, then reports what the tool said. Each test counts refunds in
the payments file: the number a user cares about.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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
from signoff_client.adapters.pydantic_ai import Paused, PydanticAIGate

from tests.client import harness
from tests.client.refunds import Payments


def refund_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] \
        if isinstance(last, ModelRequest) else []
    if returns:
        return ModelResponse(parts=[TextPart(f"tool said: {returns[0].content}")])
    return ModelResponse(parts=[ToolCallPart(
        "refund_order", {"order_id": "A-1", "amount": 40.0}, tool_call_id="call-refund-1")])


def gated_agent(payments: Payments, pauses: Path) -> tuple[PydanticAIGate[None], Agent[None, Any]]:
    gate: PydanticAIGate[None] = PydanticAIGate(FilePauses(pauses))
    gate.tool(preview=payments.render, guard=payments.check,
              reconcile=payments.find)(payments.refund_order)
    agent = Agent(FunctionModel(refund_model), toolsets=[gate.toolset],
                  output_type=[str, DeferredToolRequests])
    return gate, agent


async def test_pydantic_ai__approved_runs_once_even_when_the_same_pause_is_resumed_twice(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Pydantic AI refund")
        paused = await gate.start(agent, run, "refund order A-1")
        assert isinstance(paused, Paused) and paused.call_ids == ["call-refund-1"]
        saved = gate.pauses.load(run.id)
        assert saved is not None, "the message history is stored with the run"
        await server.approve(await server.wait_for_card("refund_order"))

        first = await asyncio.wait_for(gate.resume(agent, run), timeout=60)
        gate.pauses.save(run.id, saved)  # the same pause, resumed again
        second = await asyncio.wait_for(gate.resume(agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(first, Paused) and not isinstance(second, Paused)
    assert refund["id"] in first.output and refund["id"] in second.output


async def test_pydantic_ai__declined_becomes_tool_denied_and_never_runs(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Pydantic AI decline")
        task = asyncio.create_task(gate.run(agent, run, "refund order A-1"))
        await server.decline(await server.wait_for_card("refund_order"), "needs a manager")
        result = await asyncio.wait_for(task, timeout=60)

    assert result.output == "tool said: Declined by the approver: needs a manager"
    assert payments.refunds() == []


async def test_pydantic_ai__approval_of_an_old_preview_gets_changed_and_a_fresh_decision(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Pydantic AI changed")
        assert isinstance(await gate.start(agent, run, "refund order A-1"), Paused)
        first = await server.wait_for_card("refund_order")
        payments.set_total("A-1", 20.0)
        await server.approve(first)

        again = await asyncio.wait_for(gate.resume(agent, run), timeout=60)
        assert isinstance(again, Paused), "the changed details pause the agent on a diff card"
        assert payments.refunds() == []

        async def diff_card() -> Any:
            card = server.open_card("refund_order")
            return card if card is not None and card.ts != first.ts else None

        await server.approve(await harness.replicas.until(diff_card, timeout=30,
                                                          what="the diff card"))
        done = await asyncio.wait_for(gate.resume(agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(done, Paused) and refund["id"] in done.output
