"""The OpenAI Agents SDK adapter with the real SDK and a scripted ``Model``, against
`signoff serve`. Each test counts refunds in the payments file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import agents
from agents import Agent
from signoff_client import Signoff
from signoff_client.adapters.openai_agents import OpenAIAgentsGate, Paused
from signoff_client.adapters.pauses import FilePauses

from tests.client import harness
from tests.client.openai_fake_model import CALL_ID, RefundModel
from tests.client.refunds import Payments

agents.set_tracing_disabled(True)  # the SDK would otherwise export traces over the network


def gated_agent(payments: Payments, pauses: Path) -> tuple[OpenAIAgentsGate, Agent[Any]]:
    gate = OpenAIAgentsGate(FilePauses(pauses))
    refund = gate.tool(preview=payments.render, guard=payments.check,
                       reconcile=payments.find)(payments.refund_order)
    return gate, Agent(name="refunds", model=RefundModel(), tools=[refund])


async def test_openai_agents__resuming_the_same_state_twice_executes_once(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Agents SDK refund")
        paused = await gate.start(agent, run, "refund order A-1")
        assert paused == Paused(run.id, [CALL_ID])
        saved = gate.pauses.load(run.id)
        assert saved is not None and b'"state"' in saved, "RunState.to_json() is stored"
        await server.approve(await server.wait_for_card("refund_order"))

        first = await asyncio.wait_for(gate.resume(agent, run), timeout=60)
        gate.pauses.save(run.id, saved)  # the same RunState, resumed again
        second = await asyncio.wait_for(gate.resume(agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(first, Paused) and not isinstance(second, Paused)
    assert refund["id"] in first.final_output and refund["id"] in second.final_output


async def test_openai_agents__declined_is_rejected_with_the_reason_and_never_runs(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Agents SDK decline")
        task = asyncio.create_task(gate.run(agent, run, "refund order A-1"))
        await server.decline(await server.wait_for_card("refund_order"), "wrong customer")
        result = await asyncio.wait_for(task, timeout=60)

    assert result.final_output == "tool said: Declined by the approver: wrong customer"
    assert payments.refunds() == []


async def test_openai_agents__approval_of_an_old_preview_gets_changed_then_runs_once(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = gated_agent(payments, tmp_path / "paused")
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Agents SDK changed")
        assert isinstance(await gate.start(agent, run, "refund order A-1"), Paused)
        first = await server.wait_for_card("refund_order")
        payments.set_total("A-1", 15.0)
        await server.approve(first)
        resumed = asyncio.create_task(gate.resume(agent, run))

        async def diff_card() -> Any:
            card = server.open_card("refund_order")
            return card if card is not None and card.ts != first.ts else None

        second = await harness.replicas.until(diff_card, timeout=30, what="the diff card")
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await server.approve(second)
        result = await asyncio.wait_for(resumed, timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(result, Paused) and refund["id"] in result.final_output
