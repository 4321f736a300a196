"""Run transitions: each one guarded UPDATE, with its effects, in one transaction.

Every function here is safe to call from any number of processes at once. A
transition checks, inside its UPDATE, the state (and lease epoch) it expects;
when another caller got there first it changes nothing and says so (``None``
or LeaseLost), never half-applies.

The conversation is append-only and loaded whole to resume (``conversation``).
Appending happens inside run transitions (``Effects.messages``): one INSERT per
message, whatever the conversation's length.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, insert, select, update

from store import errors, records, schema
from store.engine import Database
from store.records import Run
from store.states import RunState
from store.transitions import Effects, state_is, transition

log = logging.getLogger(__name__)
RUNS = schema.runs
MESSAGES = schema.run_messages


def _held(epoch: int) -> list[ColumnElement[bool]]:
    return [state_is(RunState.running), RUNS.c.lease_epoch == epoch]


@dataclass(frozen=True)
class NewRun:
    id: str
    user_id: str
    question: str
    limits: dict[str, Any]
    owner_id: str
    snapshot_version: int
    app_fingerprint: str
    scope_snapshot: Any = None
    scope_resolved_at: datetime | None = None
    slack_channel: str | None = None
    #: The router's choice, when it was made before the run was created.
    route: str | None = None


async def create(db: Database, new: NewRun, *, now: datetime, fx: Effects) -> Run:
    """Insert a running run held by ``new.owner_id`` at lease epoch 1, with its effects."""
    limits = records.dumps(new.limits, what="limits")
    scope = records.dumps(new.scope_snapshot, what="scope snapshot")
    async with db.write() as conn:
        await conn.execute(
            insert(RUNS).values(
                id=new.id,
                user_id=new.user_id,
                question=new.question,
                state=RunState.running.value,
                limits=limits,
                scope_snapshot=scope,
                scope_resolved_at=new.scope_resolved_at,
                owner_id=new.owner_id,
                lease_epoch=1,
                heartbeat_at=now,
                snapshot_version=new.snapshot_version,
                app_fingerprint=new.app_fingerprint,
                slack_channel=new.slack_channel,
                route=new.route,
                started_at=now,
                updated_at=now,
            )
        )
        run = await transition(
            conn, run_id=new.id, where=[], values={}, fx=fx, now=now, action="create"
        )
    assert run is not None
    return run


async def record_step(
    db: Database,
    run_id: str,
    epoch: int,
    *,
    now: datetime,
    fx: Effects,
    steps: int = 0,
    spend_usd: float = 0.0,
    tool_calls: int = 0,
    elapsed_ms: int = 0,
    extra: dict[str, Any] | None = None,
) -> Run:
    """Persist a step's messages, ledger results and budget together, and heartbeat.

    Raises LeaseLost (nothing written) if the run is no longer running at ``epoch``.
    """
    values: dict[str, Any] = {
        "step": RUNS.c.step + steps,
        "spend_usd": RUNS.c.spend_usd + spend_usd,
        "tool_calls": RUNS.c.tool_calls + tool_calls,
        "elapsed_ms": RUNS.c.elapsed_ms + elapsed_ms,
        "heartbeat_at": now,
        **(extra or {}),
    }
    async with db.write() as conn:
        run = await transition(
            conn, run_id=run_id, where=_held(epoch), values=values, fx=fx, now=now,
            action="step",
        )
    if run is None:
        raise errors.LeaseLost(run_id, epoch)
    return run


async def heartbeat(db: Database, run_id: str, epoch: int, *, now: datetime) -> bool:
    """Refresh the lease; False when this holder has lost it."""
    async with db.write() as conn:
        result = await conn.execute(
            update(RUNS).where(RUNS.c.id == run_id, *_held(epoch)).values(heartbeat_at=now)
        )
    return result.rowcount == 1


@dataclass(frozen=True)
class Suspension:
    call_id: str
    tool: str
    pending: dict[str, Any]
    preview: dict[str, Any]
    digest: str
    token: str
    expires_at: datetime
    card: dict[str, Any]


def suspended_values(s: Suspension) -> dict[str, Any]:
    """The run's columns while it waits on ``s`` (an external call's suspension too)."""
    return {
        "state": RunState.suspended.value,
        "pending": records.dumps(s.pending, what="pending request"),
        "pending_preview": records.dumps(s.preview, what="preview"),
        "pending_preview_digest": s.digest,
        "pending_token": s.token,
        "expires_at": s.expires_at,
    }


async def suspend(
    db: Database, run_id: str, epoch: int, s: Suspension, *, now: datetime, fx: Effects,
    elapsed_ms: int = 0,
) -> Run:
    """running -> suspended with a fresh pending token and its approval record.

    Also used to re-suspend a claimed run whose preview changed. Raises
    LeaseLost when the run is not running at ``epoch``.
    """
    values = {**suspended_values(s), "elapsed_ms": RUNS.c.elapsed_ms + elapsed_ms,
              "heartbeat_at": None}
    card = records.dumps(s.card, what="approval card")
    async with db.write() as conn:
        run = await transition(
            conn, run_id=run_id, where=_held(epoch), values=values, fx=fx, now=now,
            action="suspend",
        )
        if run is None:
            raise errors.LeaseLost(run_id, epoch)
        await conn.execute(
            insert(schema.approvals).values(
                token=s.token, run_id=run_id, call_id=s.call_id, tool=s.tool,
                digest=s.digest, card=card, created_at=now,
            )
        )
    return run


async def halt(
    db: Database, run_id: str, epoch: int, reason: str, *, now: datetime, fx: Effects,
    elapsed_ms: int = 0,
) -> Run:
    """running -> halted(reason). Raises LeaseLost when not held at ``epoch``."""
    return await _end(db, run_id, epoch, RunState.halted, now=now, fx=fx,
                      elapsed_ms=elapsed_ms, values={"halt_reason": reason})


async def finish(
    db: Database, run_id: str, epoch: int, answer: str, *, now: datetime, fx: Effects,
    elapsed_ms: int = 0,
) -> Run:
    """running -> answered. Raises LeaseLost when not held at ``epoch``."""
    return await _end(db, run_id, epoch, RunState.answered, now=now, fx=fx,
                      elapsed_ms=elapsed_ms, values={"answer": answer})


async def fail(
    db: Database, run_id: str, epoch: int, reason: str, *, now: datetime, fx: Effects,
    elapsed_ms: int = 0,
) -> Run:
    """running -> failed(reason). Raises LeaseLost when not held at ``epoch``."""
    return await _end(db, run_id, epoch, RunState.failed, now=now, fx=fx,
                      elapsed_ms=elapsed_ms, values={"halt_reason": reason})


async def _end(
    db: Database, run_id: str, epoch: int, state: RunState, *, now: datetime, fx: Effects,
    elapsed_ms: int, values: dict[str, Any],
) -> Run:
    # A run that stops holds no bearer token: claims need ``state='suspended'`` anyway,
    # and each card's token and decision stay in the approvals table.
    values = {**values, "state": state.value, "heartbeat_at": None, "pending_token": None,
              "elapsed_ms": RUNS.c.elapsed_ms + elapsed_ms}
    async with db.write() as conn:
        run = await transition(
            conn, run_id=run_id, where=_held(epoch), values=values, fx=fx, now=now,
            action=state.value,
        )
    if run is None:
        raise errors.LeaseLost(run_id, epoch)
    return run


async def get(db: Database, run_id: str) -> Run:
    """The run as stored now; RunNotFound if there is none."""
    async with db.read() as conn:
        row = (await conn.execute(select(RUNS).where(RUNS.c.id == run_id))).mappings().first()
    if row is None:
        raise errors.RunNotFound(run_id)
    return Run.from_row(row)


async def conversation(db: Database, run_id: str) -> list[dict[str, Any]]:
    """Every message of the run, in order."""
    async with db.read() as conn:
        stmt = (select(MESSAGES.c.message).where(MESSAGES.c.run_id == run_id)
                .order_by(MESSAGES.c.seq))
        rows = (await conn.execute(stmt)).all()
    return [records.loads(r.message) for r in rows]


async def find(db: Database, run_id: str) -> Run | None:
    try:
        return await get(db, run_id)
    except errors.RunNotFound:
        return None


async def list_runs(
    db: Database,
    *,
    states: Sequence[RunState] = (),
    user_id: str | None = None,
    limit: int = 50,
) -> list[Run]:
    """Newest first."""
    stmt = select(RUNS).order_by(RUNS.c.started_at.desc(), RUNS.c.id).limit(limit)
    if states:
        stmt = stmt.where(state_is(*states))
    if user_id is not None:
        stmt = stmt.where(RUNS.c.user_id == user_id)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [Run.from_row(r) for r in rows]


async def count(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(RUNS))).scalar_one())


async def set_thread(db: Database, run_id: str, channel: str, ts: str) -> None:
    """Remember where the run's first card was posted, so notices go in its thread."""
    async with db.write() as conn:
        await conn.execute(
            update(RUNS)
            .where(RUNS.c.id == run_id, RUNS.c.slack_ts.is_(None))
            .values(slack_channel=channel, slack_ts=ts)
        )
