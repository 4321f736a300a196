"""The Pydantic AI and OpenAI Agents SDK adapters, with the real libraries (scripted models),
against `signoff serve`: the same guarantees through both, then each one's own way with a
changed preview. Each test counts refunds in the payments file: the number a user cares
about."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from signoff_client import Run
from signoff_client.adapters.pauses import FilePauses, Paused

from bot.sandbox import fake_slack
from tests.client import framework_agents, harness
from tests.client.refunds import Payments

# One `signoff serve` for the module: each test finds its own run's cards by the run's id.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="server")
def shared_server(module_server: harness.Served) -> harness.Served:
    return module_server


@dataclass
class Gated:
    gate: Any
    agent: Any
    output: Callable[[Any], str]  #: the agent's final answer, from its framework's result


@pytest.fixture(params=["pydantic_ai", "openai_agents"])
def gated(request: pytest.FixtureRequest, payments: Payments, tmp_path: Path) -> Gated:
    pauses = FilePauses(tmp_path / "paused")
    if request.param == "pydantic_ai":
        gate, agent = framework_agents.pydantic_ai_agent(payments, pauses)
        return Gated(gate, agent, lambda result: str(result.output))
    sdk_gate, sdk_agent = framework_agents.openai_agent(payments, pauses)
    return Gated(sdk_gate, sdk_agent, lambda result: str(result.final_output))


async def test_adapter__approved_runs_once_even_when_the_same_pause_is_resumed_twice(
        server: harness.Served, payments: Payments, gated: Gated) -> None:
    async with harness.started_run(server, "Adapter refund") as run:
        paused = await gated.gate.start(gated.agent, run, "refund order A-1")
        assert isinstance(paused, Paused) and len(paused.call_ids) == 1
        saved = gated.gate.pauses.load(run.id)
        assert saved is not None, "the agent's state is stored with the run"
        await server.approve(await server.wait_for_card("refund_order", run.id))

        first = await asyncio.wait_for(gated.gate.resume(gated.agent, run), timeout=60)
        gated.gate.pauses.save(run.id, saved)  # the same pause, resumed again
        second = await asyncio.wait_for(gated.gate.resume(gated.agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(first, Paused) and not isinstance(second, Paused)
    assert refund["id"] in gated.output(first) and refund["id"] in gated.output(second)


async def test_adapter__declined_is_told_to_the_model_with_the_reason_and_never_runs(
        server: harness.Served, payments: Payments, gated: Gated) -> None:
    async with harness.started_run(server, "Adapter decline") as run:
        task = asyncio.create_task(gated.gate.run(gated.agent, run, "refund order A-1"))
        await server.decline(await server.wait_for_card("refund_order", run.id), "needs a manager")
        result = await asyncio.wait_for(task, timeout=60)

    assert gated.output(result) == "tool said: Declined by the approver: needs a manager"
    assert payments.refunds() == []


async def test_adapter__one_gate_resumes_two_runs_at_once_each_with_its_own_refund(
        server: harness.Served, payments: Payments, gated: Gated) -> None:
    async with harness.started_run(server, "First") as one, \
            harness.started_run(server, "Second") as two:
        for run in (one, two):
            assert isinstance(await gated.gate.start(gated.agent, run, "refund A-1"), Paused)
            await server.approve(await server.wait_for_card("refund_order", run.id))
        results = await asyncio.wait_for(asyncio.gather(
            gated.gate.resume(gated.agent, one), gated.gate.resume(gated.agent, two)), 60)

    refunds = payments.refunds()
    assert sorted(r["key"].split(":")[0] for r in refunds) == sorted([one.id, two.id])
    told = [next(r["id"] for r in refunds if r["id"] in gated.output(result))
            for result in results]
    assert sorted(told) == sorted(r["id"] for r in refunds), "each run's agent saw its own"


async def paused_then_changed(served: harness.Served, run: Run, gated: Gated,
                              payments: Payments, total: float) -> fake_slack.Message:
    """The agent started to its pause, the refund's total changed while the card waits, then
    that (old) card approved: the card."""
    assert isinstance(await gated.gate.start(gated.agent, run, "refund order A-1"), Paused)
    first = await served.wait_for_card("refund_order", run.id)
    payments.set_total("A-1", total)
    await served.approve(first)
    return first


# The Agents SDK's own way: the resumed tool waits for the fresh decision.
@pytest.mark.parametrize("gated", ["openai_agents"], indirect=True)
async def test_openai_agents__approval_of_an_old_preview_gets_changed_then_runs_once(
        server: harness.Served, payments: Payments, gated: Gated) -> None:
    async with harness.started_run(server, "Agents SDK changed") as run:
        first = await paused_then_changed(server, run, gated, payments, 15.0)
        resumed = asyncio.create_task(gated.gate.resume(gated.agent, run))

        second = await harness.diff_card(server, first)
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await server.approve(second)
        result = await asyncio.wait_for(resumed, timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(result, Paused) and refund["id"] in result.final_output


# Pydantic AI's own way: it pauses again on the diff card.
@pytest.mark.parametrize("gated", ["pydantic_ai"], indirect=True)
async def test_pydantic_ai__approval_of_an_old_preview_gets_changed_and_a_fresh_decision(
        server: harness.Served, payments: Payments, gated: Gated) -> None:
    async with harness.started_run(server, "Pydantic AI changed") as run:
        first = await paused_then_changed(server, run, gated, payments, 20.0)

        again = await asyncio.wait_for(gated.gate.resume(gated.agent, run), timeout=60)
        assert isinstance(again, Paused), "the changed details pause the agent on a diff card"
        assert payments.refunds() == []

        await server.approve(await harness.diff_card(server, first))
        done = await asyncio.wait_for(gated.gate.resume(gated.agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(done, Paused) and refund["id"] in done.output
