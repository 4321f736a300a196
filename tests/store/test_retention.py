"""Retention: finished runs older than the window go, with everything they own; nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, event, func, select

from store import claims, ledger, retention, runs, schema
from store.engine import Database
from store.records import Run
from store.states import LedgerStatus, RunState
from store.transitions import Effects, LedgerCompletion
from tests.store.factories import make_run, make_suspended

CUTOFF = datetime(2030, 1, 31, tzinfo=UTC)
OLD = CUTOFF - timedelta(days=1)
YOUNG = CUTOFF + timedelta(hours=1)
OWNED = (
    schema.run_messages, schema.run_events, schema.tool_calls, schema.approvals, schema.outbox,
)


async def _full_run(db: Database, end: RunState, *, now: datetime) -> Run:
    """A run that suspended, was approved, called a tool and then ended in ``end``.

    It owns rows in every table: messages, events, ledger, an approval, outbox.
    """
    run, token = await make_suspended(db, now=now)
    won = await claims.claim(
        db, token, decision="approve", actor="U9", reason=None, owner_id="owner-b", now=now,
        fx=Effects(events=[("decision", {"actor": "U9"})]),
    )
    assert isinstance(won, claims.ClaimWon)
    epoch = won.run.lease_epoch
    await ledger.start(db, run.id, epoch, call_id="call_1", tool="send_quote",
                       args={"quote_id": "Q-1"}, idempotency_key=f"{run.id}:call_1", now=now)
    await runs.record_step(
        db, run.id, epoch, now=now, steps=1, tool_calls=1,
        fx=Effects(messages=[{"role": "tool", "content": "sent"}],
                   ledger=[LedgerCompletion("call_1", LedgerStatus.succeeded, {"ok": True})],
                   outbox=[("card_update", {"token": token})]),
    )
    fx = Effects(events=[(end.value, {})], outbox=[("run_notice", {"event": end.value})])
    if end is RunState.answered:
        return await runs.finish(db, run.id, epoch, "sent Q-1", now=now, fx=fx)
    if end is RunState.halted:
        return await runs.halt(db, run.id, epoch, "budget:steps", now=now, fx=fx)
    return await runs.fail(db, run.id, epoch, "incomplete", now=now, fx=fx)


async def _rows(db: Database, table: Table, run_ids: set[str]) -> int:
    async with db.read() as conn:
        stmt = select(func.count()).select_from(table)
        if table is not schema.runs:
            stmt = stmt.where(table.c.run_id.in_(run_ids))
        else:
            stmt = stmt.where(table.c.id.in_(run_ids))
        return int((await conn.execute(stmt)).scalar_one())


async def _census(db: Database, run_ids: set[str]) -> dict[str, int]:
    return {t.name: await _rows(db, t, run_ids) for t in (schema.runs, *OWNED)}


async def test_purge__old_finished_runs_go_with_everything_they_own(db: Database) -> None:
    doomed = {
        (await _full_run(db, state, now=OLD)).id
        for state in (RunState.answered, RunState.halted, RunState.failed)
    }
    before = await _census(db, doomed)
    assert all(n > 0 for n in before.values()), before

    purged = await retention.purge(db, before=CUTOFF)

    assert purged == 3
    assert await _census(db, doomed) == {t: 0 for t in before}


async def test_purge__leaves_suspended_running_and_young_runs_alone(db: Database) -> None:
    long_ago = CUTOFF - timedelta(days=365)
    suspended, _ = await make_suspended(db, now=long_ago)
    running = await make_run(db, now=long_ago)
    young = {(await _full_run(db, s, now=YOUNG)).id for s in (RunState.answered, RunState.failed)}
    at_cutoff = await _full_run(db, RunState.halted, now=CUTOFF)  # not *older* than the cutoff
    old = await _full_run(db, RunState.answered, now=OLD)
    kept = {suspended.id, running.id, at_cutoff.id, *young}
    before = await _census(db, kept)

    purged = await retention.purge(db, before=CUTOFF)

    assert purged == 1
    assert await runs.find(db, old.id) is None
    assert await _census(db, kept) == before
    assert (await runs.get(db, suspended.id)).state is RunState.suspended
    assert (await runs.get(db, running.id)).state is RunState.running
    assert await retention.purge(db, before=CUTOFF) == 0


@contextmanager
def _run_deletes(db: Database) -> Iterator[list[int]]:
    """Rows removed by each DELETE on ``runs``, in order (the batches as the database saw them)."""
    deleted: list[int] = []

    def after(_conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM RUNS"):
            deleted.append(cursor.rowcount)

    event.listen(db.engine.sync_engine, "after_cursor_execute", after)
    try:
        yield deleted
    finally:
        event.remove(db.engine.sync_engine, "after_cursor_execute", after)


async def test_purge__deletes_in_batches(db: Database) -> None:
    ends = (RunState.answered, RunState.halted, RunState.failed)
    doomed: set[str] = set()
    for i in range(30):
        run = await make_run(db, now=OLD - timedelta(minutes=i))
        end = ends[i % 3]
        fx = Effects(events=[(end.value, {})], outbox=[("run_notice", {"i": i})])
        if end is RunState.answered:
            await runs.finish(db, run.id, run.lease_epoch, "ok", now=OLD - timedelta(minutes=i),
                              fx=fx)
        elif end is RunState.halted:
            await runs.halt(db, run.id, run.lease_epoch, "budget:steps", now=OLD, fx=fx)
        else:
            await runs.fail(db, run.id, run.lease_epoch, "incomplete", now=OLD, fx=fx)
        doomed.add(run.id)
    survivor, _ = await make_suspended(db, now=OLD)

    with _run_deletes(db) as batches:
        purged = await retention.purge(db, before=CUTOFF, batch=7)

    assert purged == 30
    assert batches == [7, 7, 7, 7, 2]
    assert await _census(db, doomed) == {t.name: 0 for t in (schema.runs, *OWNED)}
    assert [r.id for r in await runs.list_runs(db)] == [survivor.id]
