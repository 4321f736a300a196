from __future__ import annotations

from datetime import timedelta

import pytest

from store import errors, ledger, runs, sweeps
from store.engine import Database
from store.states import RunState
from store.transitions import Effects
from tests.store.factories import make_run, utcnow


async def test_lease__old_epoch_writes_nothing_after_takeover(db: Database) -> None:
    long_ago = utcnow() - timedelta(minutes=10)
    run = await make_run(db, now=long_ago, owner_id="zombie")
    taken = await sweeps.take_over_orphans(
        db, now=utcnow(), stale_before=utcnow() - timedelta(seconds=90), owner_id="reaper",
        max_attempts=2, exhausted_effects=lambda r: Effects(),
        taken_effects=lambda r: Effects(events=[("recovered", {})]),
    )
    assert [r.id for r in taken.taken] == [run.id]
    new = taken.taken[0]
    assert new.lease_epoch == run.lease_epoch + 1 and new.owner_id == "reaper"
    assert new.recovery_attempts == 1

    with pytest.raises(errors.LeaseLost):
        await runs.record_step(
            db, run.id, run.lease_epoch, now=utcnow(), steps=1,
            fx=Effects(messages=[{"role": "assistant", "content": "zombie"}]),
        )
    with pytest.raises(errors.LeaseLost):
        await runs.finish(db, run.id, run.lease_epoch, "zombie answer", now=utcnow(), fx=Effects())
    with pytest.raises(errors.LeaseLost):
        await ledger.start(db, run.id, run.lease_epoch, call_id="c1", tool="t", args={},
                           idempotency_key="k1", now=utcnow())
    assert not await runs.heartbeat(db, run.id, run.lease_epoch, now=utcnow())

    after = await runs.get(db, run.id)
    assert after.state is RunState.running and after.step == 0 and after.answer is None
    assert [m["content"] for m in await runs.conversation(db, run.id)] == [run.question]
    assert await ledger.for_run(db, run.id) == []


async def test_orphans__capped_recovery_fails_the_run(db: Database) -> None:
    run = await make_run(db, now=utcnow() - timedelta(minutes=10))
    for attempt in range(3):
        stale_now = utcnow() + timedelta(minutes=10 * (attempt + 1))
        result = await sweeps.take_over_orphans(
            db, now=stale_now - timedelta(minutes=9), stale_before=stale_now,
            owner_id="reaper", max_attempts=2,
            exhausted_effects=lambda r: Effects(outbox=[("run_notice", {"event": "failed"})]),
            taken_effects=lambda r: Effects(),
        )
        if attempt < 2:
            assert [r.id for r in result.taken] == [run.id]
        else:
            assert [r.id for r in result.exhausted] == [run.id] and result.taken == []
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "recovery_exhausted"
