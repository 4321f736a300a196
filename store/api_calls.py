"""External calls: each status change one guarded UPDATE, with the run's, in one transaction.

A call moves only from the statuses a caller names (``expect``): of any number
of concurrent callers (tasks, replicas), exactly one moves it; every other
one changes nothing and gets ``None``, then reads the call to learn why. The
run's own transition (suspend, budget, events, outbox) commits with it or not
at all. Every change wakes the call's waiters at commit (``store.call_watch``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, exists, insert, literal_column, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from store import call_watch, records, schema
from store.api_records import ApiCall
from store.engine import Database
from store.records import Run
from store.runs import Suspension, suspended_values
from store.states import CallStatus, LedgerStatus, RunState
from store.transitions import Effects, state_is, transition

calls = schema.api_calls
owners = schema.api_runs
runs_t = schema.runs


@dataclass(frozen=True)
class NewCall:
    call_id: str
    tool: str
    args: dict[str, Any]
    request_digest: str
    spend_usd: float


@dataclass(frozen=True)
class RunChange:
    """What the call's run does in the same transaction: its guard, new values and effects."""

    #: The states the run must be in (any, when empty).
    expect: tuple[RunState, ...] = ()
    values: dict[str, Any] = field(default_factory=dict)
    fx: Effects = field(default_factory=Effects)
    #: Charge the run's budget: one more tool call, and this spend.
    charge_spend_usd: float | None = None
    #: A new approval card for the call (the run suspends for it).
    suspension: Suspension | None = None
    #: Record the call as ``started`` in the ledger, under this idempotency key.
    ledger_key: str | None = None


class _Refused(Exception):
    """The run's guard did not match: roll the call's change back."""


async def request(
    db: Database, run_id: str, new: NewCall, run: RunChange, *, now: datetime,
) -> tuple[ApiCall, Run] | None:
    """Insert the call (``pending`` with ``run.suspension``'s card, or as ``run`` decides).

    None when the run's guard does not match or the call id exists already:
    re-read the call to tell which.
    """
    s = run.suspension
    row = {
        "run_id": run_id, "call_id": new.call_id, "tool": new.tool,
        "args": records.dumps(new.args, what=f"arguments of {new.tool}"),
        "request_digest": new.request_digest, "spend_usd": new.spend_usd,
        "status": CallStatus.pending.value, "token": s.token if s else None,
        "expires_at": s.expires_at if s else None, "created_at": now, "updated_at": now,
    }
    try:
        async with db.write() as conn:
            inserted = (await conn.execute(insert(calls).values(**row).returning(*calls.c))
                        ).mappings().one()
            moved = await _run_side(conn, run_id, new.call_id, new.tool, new.args, run, now)
    except (_Refused, IntegrityError):
        return None
    return ApiCall.from_row(inserted), moved


async def move(
    db: Database, run_id: str, call_id: str, *, expect: Collection[CallStatus],
    values: dict[str, Any], run: RunChange, now: datetime,
    lease_before: datetime | None = None, attempts: int | None = None,
) -> tuple[ApiCall, Run] | None:
    """Move the call from one of ``expect`` with ``values``, and its run by ``run``; None,
    with nothing written, when either guard does not match. ``lease_before``: only if the
    call's lease ran out before then; ``attempts``: only at this recovery attempt count."""
    where: list[ColumnElement[bool]] = []
    if lease_before is not None:
        where.append(calls.c.lease_until < lease_before)
    if attempts is not None:
        where.append(calls.c.recovery_attempts == attempts)
    stmt = (
        update(calls)
        .where(calls.c.run_id == run_id, calls.c.call_id == call_id,
               calls.c.status.in_([s.value for s in expect]), *where)
        .values(**values, updated_at=now)
        .returning(*calls.c)
    )
    try:
        async with db.write() as conn:
            row = (await conn.execute(stmt)).mappings().first()
            if row is None:
                return None
            call = ApiCall.from_row(row)
            moved = await _run_side(conn, run_id, call_id, call.tool, call.args, run, now)
    except _Refused:
        return None
    return call, moved


async def _run_side(
    conn: AsyncConnection, run_id: str, call_id: str, tool: str, args: dict[str, Any],
    run: RunChange, now: datetime,
) -> Run:
    values = dict(run.values)
    if run.suspension is not None:
        values.update(suspended_values(run.suspension))
    if run.charge_spend_usd is not None:
        values.update(tool_calls=runs_t.c.tool_calls + 1,
                      spend_usd=runs_t.c.spend_usd + run.charge_spend_usd)
    where = [state_is(*run.expect)] if run.expect else []
    moved = await transition(conn, run_id=run_id, where=where, values=values, fx=run.fx,
                             now=now, action=f"call_{call_id}")
    if moved is None:
        raise _Refused()
    if run.suspension is not None:
        s = run.suspension
        await conn.execute(insert(schema.approvals).values(
            token=s.token, run_id=run_id, call_id=s.call_id, tool=s.tool, digest=s.digest,
            card=records.dumps(s.card, what="approval card"), created_at=now,
        ))
    if run.ledger_key is not None:
        await conn.execute(insert(schema.tool_calls).values(
            run_id=run_id, call_id=call_id, tool=tool,
            args=records.dumps(args, what=f"arguments of {tool}"),
            idempotency_key=run.ledger_key, status=LedgerStatus.started.value, started_at=now,
        ))
    await call_watch.notify(conn, run_id, call_id)
    return moved


def none_of_run(*statuses: CallStatus) -> ColumnElement[bool]:
    """For a run transition: the run has no call in one of ``statuses`` (checked in its UPDATE)."""
    return ~exists().where(calls.c.run_id == runs_t.c.id,
                           calls.c.status.in_([s.value for s in statuses]))


async def get(db: Database, run_id: str, call_id: str) -> ApiCall | None:
    stmt = select(calls).where(calls.c.run_id == run_id, calls.c.call_id == call_id)
    async with db.read() as conn:
        row = (await conn.execute(stmt)).mappings().first()
    return ApiCall.from_row(row) if row is not None else None


async def for_run(db: Database, run_id: str) -> list[ApiCall]:
    stmt = select(calls).where(calls.c.run_id == run_id).order_by(calls.c.created_at)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [ApiCall.from_row(r) for r in rows]


async def for_key(
    db: Database, key_id: str, *, status: CallStatus | None, limit: int = 100
) -> list[ApiCall]:
    """The calls of the runs ``key_id`` created, oldest first, optionally of one status."""
    stmt = (select(calls).join(owners, owners.c.run_id == calls.c.run_id)
            .where(owners.c.key_id == key_id).order_by(calls.c.created_at).limit(limit))
    if status is not None:
        stmt = stmt.where(calls.c.status == status.value)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [ApiCall.from_row(r) for r in rows]


async def lapsed(db: Database, *, now: datetime, limit: int = 100) -> list[ApiCall]:
    """Executing calls whose lease ran out before ``now`` (the partial index's rows)."""
    stmt = (select(calls)
            .where(calls.c.status == literal_column("'executing'"), calls.c.lease_until < now)
            .order_by(calls.c.lease_until).limit(limit))
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [ApiCall.from_row(r) for r in rows]


async def with_status(db: Database, status: CallStatus, *, limit: int = 100) -> list[ApiCall]:
    """Calls of ``status`` whose runs have not ended (answered or failed), oldest change first."""
    run = schema.runs
    stmt = (select(calls).join(run, run.c.id == calls.c.run_id)
            .where(calls.c.status == status.value,
                   run.c.state.notin_([RunState.answered.value, RunState.failed.value]))
            .order_by(calls.c.updated_at).limit(limit))
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [ApiCall.from_row(r) for r in rows]
