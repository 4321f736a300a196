"""Scheduled sweeps: expire stale suspensions, take over orphaned runs.

Both read candidates through their partial index and then move each run with a
guarded UPDATE that re-checks what the sweep decided on, so any number of
sweepers (tasks or replicas) move each run once. On PostgreSQL candidates are
locked with ``SKIP LOCKED`` so concurrent sweepers split the work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store import api_runs, schema
from store.engine import Database
from store.reasons import FailReason, HaltReason
from store.records import LedgerEntry, Run
from store.states import LedgerStatus, RunState
from store.transitions import Effects, state_is, transition

RUNS = schema.runs


def expiry_candidates(now: datetime, limit: int) -> Select[Any]:
    return (
        select(RUNS.c.id)
        .where(state_is(RunState.suspended), RUNS.c.expires_at <= now)
        .order_by(RUNS.c.expires_at)
        .limit(limit)
    )


def orphan_candidates(stale_before: datetime, limit: int) -> Select[Any]:
    return (
        select(RUNS.c.id, RUNS.c.lease_epoch, RUNS.c.recovery_attempts)
        # An external run's agent lives elsewhere: there is nothing here to take over.
        .where(state_is(RunState.running), RUNS.c.heartbeat_at < stale_before,
               RUNS.c.app_fingerprint != api_runs.EXTERNAL)
        .order_by(RUNS.c.heartbeat_at)
        .limit(limit)
    )


async def expire_due(
    db: Database,
    *,
    now: datetime,
    effects_for: Callable[[Run], Effects],
    limit: int = 100,
) -> list[Run]:
    """suspended -> halted(suspension_expired) for every run whose ``expires_at`` <= now.

    ``effects_for`` gets the run as it was before expiry and returns the events
    and outbox rows to write with it (its ``pending_token`` names the card; the
    halted run keeps none). A click racing this sweep either claimed first (the
    run is no longer suspended: skipped) or is refused afterwards.
    """
    stmt = expiry_candidates(now, limit)
    if not db.is_sqlite:
        stmt = stmt.with_for_update(skip_locked=True)
    expired: list[Run] = []
    async with db.write() as conn:
        ids: list[str] = list((await conn.execute(stmt)).scalars().all())
        for run_id in ids:
            before = (await conn.execute(select(RUNS).where(RUNS.c.id == run_id))).mappings().one()
            run = await transition(
                conn,
                run_id=run_id,
                where=[state_is(RunState.suspended), RUNS.c.expires_at <= now],
                values={"state": RunState.halted.value,
                        "halt_reason": HaltReason.suspension_expired.value,
                        "pending_token": None},
                fx=effects_for(Run.from_row(before)),
                now=now,
                action="expire",
            )
            if run is not None:
                expired.append(run)
    return expired


@dataclass(frozen=True)
class Orphan(Run):
    """A run about to be failed ``recovery_exhausted``, with what its ledger left open.

    It is a Run, so an ``exhausted_effects`` written for a Run keeps working.
    """

    #: Tool calls still ``started`` (outcome unknown), oldest first, read in the
    #: transaction that fails the run: exactly what the ledger holds at failure time.
    started: tuple[LedgerEntry, ...] = ()


@dataclass
class Takeovers:
    #: Runs now held by the sweeper at a new lease epoch; continue them.
    taken: list[Run] = field(default_factory=list)
    #: Runs that hit the recovery cap and were failed ``recovery_exhausted``.
    exhausted: list[Run] = field(default_factory=list)


async def take_over_orphans(
    db: Database,
    *,
    now: datetime,
    stale_before: datetime,
    owner_id: str,
    max_attempts: int,
    exhausted_effects: Callable[[Orphan], Effects],
    taken_effects: Callable[[Run], Effects],
    limit: int = 50,
) -> Takeovers:
    """Take over running runs whose heartbeat is older than ``stale_before``.

    Each takeover is one UPDATE that re-checks the state, the lease epoch and
    the stale heartbeat it decided on, bumps the epoch (fencing the old holder
    out) and counts the recovery attempt. A run already recovered
    ``max_attempts`` times is failed instead: an uncapped reaper is an
    infinite loop with a database behind it; ``exhausted_effects`` gets it
    as an Orphan, with its ``started`` ledger rows.
    """
    stmt = orphan_candidates(stale_before, limit)
    if not db.is_sqlite:
        stmt = stmt.with_for_update(skip_locked=True)
    out = Takeovers()
    async with db.write() as conn:
        candidates = (await conn.execute(stmt)).all()
        for run_id, epoch, attempts in candidates:
            guard = [
                state_is(RunState.running),
                RUNS.c.lease_epoch == epoch,
                RUNS.c.heartbeat_at < stale_before,
            ]
            before = Run.from_row(
                (await conn.execute(select(RUNS).where(RUNS.c.id == run_id))).mappings().one()
            )
            if attempts >= max_attempts:
                run = await transition(
                    conn, run_id=run_id,
                    where=[*guard, RUNS.c.recovery_attempts >= max_attempts],
                    values={"state": RunState.failed.value,
                            "halt_reason": FailReason.recovery_exhausted.value,
                            "heartbeat_at": None, "pending_token": None},
                    fx=exhausted_effects(await _orphan(conn, before)), now=now,
                    action=FailReason.recovery_exhausted.value,
                )
                if run is not None:
                    out.exhausted.append(run)
                continue
            run = await transition(
                conn, run_id=run_id,
                where=[*guard, RUNS.c.recovery_attempts < max_attempts],
                values={"owner_id": owner_id, "lease_epoch": RUNS.c.lease_epoch + 1,
                        "recovery_attempts": RUNS.c.recovery_attempts + 1, "heartbeat_at": now},
                fx=taken_effects(before), now=now, action="take_over",
            )
            if run is not None:
                out.taken.append(run)
    return out


async def _orphan(conn: AsyncConnection, run: Run) -> Orphan:
    # Read under the same lock as the failing UPDATE (the candidate's row lock on
    # PostgreSQL, the write lock on SQLite): a holder's ledger writes also write the
    # run row, so none can land between this read and the failure.
    CALLS = schema.tool_calls
    rows = (await conn.execute(
        select(CALLS)
        .where(CALLS.c.run_id == run.id, CALLS.c.status == LedgerStatus.started.value)
        .order_by(CALLS.c.started_at, CALLS.c.call_id)
    )).mappings().all()
    return Orphan(**vars(run), started=tuple(LedgerEntry.from_row(r) for r in rows))
