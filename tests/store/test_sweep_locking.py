"""The sweeps on PostgreSQL skip a run another transaction has locked, and take the rest.

A replica's sweep that waited on a row lock held by another sweeper (or by a click's
claim) would stall every sweep behind it. ``SKIP LOCKED`` makes it move on: the locked
run is left to whoever holds it, the others are swept now, and a later sweep takes the
one that was skipped once the lock is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from store import engine, events, runs, schema, sweeps
from store.engine import Database
from store.records import Run
from store.states import RunState
from store.transitions import Effects
from tests.store.factories import make_run, make_suspended

pytestmark = pytest.mark.postgres

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(minutes=30)
STALE = timedelta(hours=1)
#: A sweep that skips the locked row answers in milliseconds; one that waits never does.
PROMPTLY = 10.0

R = TypeVar("R")


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[tuple[Database, str]]:
    """The session's PostgreSQL database, emptied (a sweep sees every run in it), and its URL."""
    db = engine.connect(postgres_url)
    names = ", ".join(t.name for t in schema.metadata.sorted_tables)
    async with db.write() as conn:
        await conn.exec_driver_sql(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
    try:
        yield db, postgres_url
    finally:
        await db.dispose()


@asynccontextmanager
async def row_locked(url: str, run_id: str) -> AsyncIterator[None]:
    """Another session holds ``run_id``'s row lock (SELECT ... FOR UPDATE) until exit."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        tx = conn.transaction()
        await tx.start()
        locked = await conn.fetchval("SELECT id FROM runs WHERE id = $1 FOR UPDATE", run_id)
        assert locked == run_id
        try:
            yield
        finally:
            await tx.rollback()
    finally:
        await conn.close()


async def promptly(work: Awaitable[R], what: str) -> R:
    try:
        return await asyncio.wait_for(work, timeout=PROMPTLY)
    except TimeoutError:
        pytest.fail(f"{what} waited on the locked run instead of skipping it")


def _expiry_effects(run: Run) -> Effects:
    return Effects(events=[("expired", {"token": run.pending_token})])


def _taken_effects(run: Run) -> Effects:
    return Effects(events=[("recovered", {"by": "sweeper"})])


def _exhausted_effects(run: sweeps.Orphan) -> Effects:
    return Effects(events=[("failed", {"reason": "recovery_exhausted"})])


async def _take_over(db: Database, now: datetime) -> sweeps.Takeovers:
    return await sweeps.take_over_orphans(
        db, now=now, stale_before=now - timedelta(seconds=90), owner_id="sweeper",
        max_attempts=2, exhausted_effects=_exhausted_effects, taken_effects=_taken_effects)


async def test_expire_due__skips_a_locked_suspension_and_expires_the_others(
    pg: tuple[Database, str],
) -> None:
    db, url = pg
    # The oldest expiry first: it is the first candidate the sweep reads.
    suspended = [(await make_suspended(db, now=T0 + timedelta(seconds=i), ttl=TTL))[0]
                 for i in range(3)]
    locked, others = suspended[0], suspended[1:]
    now = T0 + TTL + timedelta(minutes=5)

    async with row_locked(url, locked.id):
        expired = await promptly(
            sweeps.expire_due(db, now=now, effects_for=_expiry_effects), "expire_due")

        assert sorted(r.id for r in expired) == sorted(r.id for r in others)
        for run in others:
            after = await runs.get(db, run.id)
            assert after.state is RunState.halted and after.halt_reason == "suspension_expired"
        still = await runs.get(db, locked.id)
        assert still.state is RunState.suspended and still.pending_token == locked.pending_token
        assert await events.for_run(db, locked.id, kind="expired") == []

    # Skipped, not lost: once the lock is gone the next sweep expires it.
    later = await promptly(sweeps.expire_due(db, now=now, effects_for=_expiry_effects),
                           "expire_due")
    assert [r.id for r in later] == [locked.id]
    assert (await runs.get(db, locked.id)).halt_reason == "suspension_expired"


async def test_take_over_orphans__skips_a_locked_run_and_takes_the_others(
    pg: tuple[Database, str],
) -> None:
    db, url = pg
    # Created (and last heard from) an hour ago, oldest first: every one is an orphan.
    orphans = [await make_run(db, owner_id="proc_dead", now=T0 - STALE + timedelta(seconds=i))
               for i in range(3)]
    locked, others = orphans[0], orphans[1:]

    async with row_locked(url, locked.id):
        took = await promptly(_take_over(db, T0), "take_over_orphans")

        assert sorted(r.id for r in took.taken) == sorted(r.id for r in others)
        assert took.exhausted == []
        for run in others:
            after = await runs.get(db, run.id)
            assert after.owner_id == "sweeper" and after.lease_epoch == run.lease_epoch + 1
            assert after.recovery_attempts == 1
        still = await runs.get(db, locked.id)
        assert still.state is RunState.running and still.owner_id == "proc_dead"
        assert still.lease_epoch == locked.lease_epoch and still.recovery_attempts == 0
        assert await events.for_run(db, locked.id, kind="recovered") == []

    later = await promptly(_take_over(db, T0), "take_over_orphans")
    assert [r.id for r in later.taken] == [locked.id]
    assert (await runs.get(db, locked.id)).owner_id == "sweeper"
