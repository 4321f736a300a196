"""Runs created through the API: who created them, and external runs' own transitions.

An external run is an ordinary ``runs`` row whose agent lives elsewhere: it
is ``running`` with no heartbeat (nobody here holds it, so the reaper never
takes it over) and moves only through these guarded UPDATEs and the same
claims, expiry and outbox as a hosted run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, literal_column, select
from sqlalchemy.exc import IntegrityError

from store import api_calls, records, schema
from store.api_records import ApiRun
from store.engine import Database
from store.records import EXTERNAL_FINGERPRINT, Run
from store.runs import NewRun
from store.states import CallStatus, RunState
from store.transitions import Effects, state_is, transition

owners = schema.api_runs
EXTERNAL: ColumnElement[str] = literal_column(f"'{EXTERNAL_FINGERPRINT}'")
runs_t = schema.runs


@dataclass(frozen=True)
class Origin:
    """How a run came through the API: its key, idempotency key and request digest."""

    key_id: str
    idempotency_key: str
    request_digest: str
    external: bool


async def create_external(
    db: Database, new: NewRun, origin: Origin, *, now: datetime, fx: Effects
) -> Run | ApiRun:
    """Insert a running external run with its origin; or the run that key already made.

    Concurrent creates with one idempotency key: one inserts, every other one
    gets that run's ``ApiRun`` (compare its ``request_digest`` with yours).
    """
    try:
        async with db.write() as conn:
            await conn.execute(insert(runs_t).values(
                id=new.id, user_id=new.user_id, question=new.question,
                state=RunState.running.value, limits=records.dumps(new.limits, what="limits"),
                owner_id=new.owner_id, lease_epoch=1, heartbeat_at=None,
                snapshot_version=new.snapshot_version, app_fingerprint=EXTERNAL_FINGERPRINT,
                slack_channel=new.slack_channel, started_at=now, updated_at=now,
            ))
            await conn.execute(insert(owners).values(run_id=new.id, **vars(origin),
                                                     created_at=now))
            run = await transition(conn, run_id=new.id, where=[], values={}, fx=fx, now=now,
                                   action="create_external")
    except IntegrityError:
        existing = await by_idempotency(db, origin.key_id, origin.idempotency_key)
        if existing is None:
            raise
        return existing
    assert run is not None
    return run


async def link(db: Database, run_id: str, origin: Origin, *, now: datetime) -> ApiRun | None:
    """Record that a hosted run was created through the API; None if the key already made one
    with this idempotency key (the caller's run then stands alone)."""
    try:
        async with db.write() as conn:
            await conn.execute(insert(owners).values(run_id=run_id, **vars(origin),
                                                     created_at=now))
    except IntegrityError:
        return None
    return ApiRun(run_id, origin.key_id, origin.idempotency_key, origin.request_digest,
                  origin.external, now)


async def by_idempotency(db: Database, key_id: str, idempotency_key: str) -> ApiRun | None:
    stmt = select(owners).where(owners.c.key_id == key_id,
                                owners.c.idempotency_key == idempotency_key)
    async with db.read() as conn:
        row = (await conn.execute(stmt)).mappings().first()
    return ApiRun.from_row(row) if row is not None else None


async def origin_of(db: Database, run_id: str) -> ApiRun | None:
    """How the run came through the API; None for a run started in Slack."""
    async with db.read() as conn:
        row = (await conn.execute(select(owners).where(owners.c.run_id == run_id))
               ).mappings().first()
    return ApiRun.from_row(row) if row is not None else None


async def owned(db: Database, run_id: str, key_id: str) -> tuple[Run, ApiRun] | None:
    """The run if ``key_id`` created it; None otherwise (another key's run looks missing)."""
    async with db.read() as conn:
        origin = (await conn.execute(
            select(owners).where(owners.c.run_id == run_id, owners.c.key_id == key_id)
        )).mappings().first()
        if origin is None:
            return None
        row = (await conn.execute(select(runs_t).where(runs_t.c.id == run_id))).mappings().one()
    return Run.from_row(row), ApiRun.from_row(origin)


async def move(
    db: Database, run_id: str, *, expect: tuple[RunState, ...], values: dict[str, Any],
    now: datetime, fx: Effects, action: str, settled_calls: bool = False,
) -> Run | None:
    """An external run from one of ``expect`` to ``values`` (halt, finish, fail, cancel),
    with ``fx``; None, with nothing written, when it is not in one of those states (or,
    with ``settled_calls``, while one of its calls is executing or unknown)."""
    where = [api_calls.none_of_run(CallStatus.executing, CallStatus.unknown)] \
        if settled_calls else []
    async with db.write() as conn:
        return await transition(conn, run_id=run_id,
                                where=[state_is(*expect), runs_t.c.app_fingerprint == EXTERNAL,
                                       *where],
                                values=values, fx=fx, now=now, action=action)
