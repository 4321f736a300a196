"""A lost execution lease: the call goes ``unknown``, is never retried, and is reconciled.

The lease is made to run out by writing the row (no sleeping); the reaper
is the scheduler's own entry (``reap.recover_orphans``).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from resume import reap
from store import ledger, runs, schema
from store.states import LedgerStatus, RunState
from tests.bot.api_harness import Agent, approved
from tests.bot.harness import BotWorld


async def _executing(world: BotWorld, agent: Agent) -> str:
    run_id, _ = await approved(world, agent)
    assert (await agent.execute(run_id))[0] == 200
    return run_id


async def _lease_ran_out(world: BotWorld, run_id: str) -> None:
    calls = schema.api_calls
    async with world.db.write() as conn:
        await conn.execute(update(calls).where(calls.c.run_id == run_id).values(
            lease_until=world.services.rt.now() - timedelta(seconds=1)))


async def test_lost_lease__unknown_then_reconciled_by_the_agent(
    world: BotWorld, agent: Agent
) -> None:
    run_id = await _executing(world, agent)
    assert (await agent.call("POST", f"/runs/{run_id}/calls/c1/heartbeat"))[0] == 200
    await _lease_ran_out(world, run_id)

    report = await reap.recover_orphans(world.services.rt)
    assert [c.call_id for c in report.calls.unknown] == ["c1"]
    assert (await agent.get_call(run_id))["status"] == "unknown"
    status, listed = await agent.call("GET", "/calls?status=unknown")
    assert status == 200 and [(c["run_id"], c["call_id"]) for c in listed["calls"]] == [
        (run_id, "c1")]
    assert (await agent.call("POST", f"/runs/{run_id}/calls/c1/heartbeat"))[0] == 409
    assert (await agent.execute(run_id))[1]["error"] == "already_executed"  # never retried
    await world.deliver()
    assert any("unknown" in m.text for m in world.fake.messages())

    status, settled = await agent.result(run_id, evidence={"refund_id": "R-1"})
    assert status == 200 and settled["status"] == "succeeded"
    [entry] = await ledger.for_run(world.db, run_id)
    assert entry.status is LedgerStatus.succeeded
    assert (await agent.call("GET", "/calls?status=unknown"))[1]["calls"] == []


async def test_lost_lease__nobody_settles_and_the_run_fails_outcome_unknown(
    world: BotWorld, agent: Agent
) -> None:
    run_id = await _executing(world, agent)
    await _lease_ran_out(world, run_id)
    rt = world.services.rt
    for _ in range(rt.max_recovery_attempts + 1):
        await reap.recover_orphans(rt)
        assert (await runs.get(world.db, run_id)).state is RunState.running
    report = await reap.recover_orphans(rt)
    assert [r.id for r in report.calls.failed] == [run_id]
    run = await agent.get_run(run_id)
    assert run["state"] == "failed" and run["reason"] == "outcome_unknown"
    [entry] = await ledger.for_run(world.db, run_id)
    assert entry.status is LedgerStatus.unknown
    await world.deliver()
    assert any("outcome_unknown" in m.text or "refund_order" in str(m.blocks)
               for m in world.fake.messages() if "failed" in m.text)
