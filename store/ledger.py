"""The tool-call ledger: a call is recorded as ``started`` before it runs.

A ``started`` row with no completion is an unknown outcome: the process may
have died before or after the tool's write. Recovery reconciles those rows
before anything else runs. Completions are written with the tool's result
message and the run's budget, in one transaction (``Effects.ledger``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, insert, select, update

from store import errors, records, schema
from store.engine import Database
from store.records import LedgerEntry
from store.states import LedgerStatus, RunState
from store.transitions import state_is

CALLS = schema.tool_calls
RUNS = schema.runs


async def start(
    db: Database,
    run_id: str,
    epoch: int,
    *,
    call_id: str,
    tool: str,
    args: dict[str, Any],
    idempotency_key: str,
    now: datetime,
) -> LedgerEntry:
    """Record that the tool is about to run; return the existing row if there is one.

    Guarded by the lease: a holder that lost the run writes nothing (LeaseLost).
    The caller must look at the returned status: anything but ``started``
    written by this call means the tool must not simply be called again.
    """
    encoded = records.dumps(args, what=f"arguments of {tool}")
    async with db.write() as conn:
        held = await conn.execute(
            update(RUNS)
            .where(RUNS.c.id == run_id, state_is(RunState.running), RUNS.c.lease_epoch == epoch)
            .values(heartbeat_at=now)
        )
        if held.rowcount != 1:
            raise errors.LeaseLost(run_id, epoch)
        existing = (await conn.execute(_one(run_id, call_id))).mappings().first()
        if existing is not None:
            return LedgerEntry.from_row(existing)
        await conn.execute(
            insert(CALLS).values(
                run_id=run_id, call_id=call_id, tool=tool, args=encoded,
                idempotency_key=idempotency_key, status=LedgerStatus.started.value,
                started_at=now,
            )
        )
    return LedgerEntry(run_id, call_id, tool, args, idempotency_key, LedgerStatus.started,
                       None, now, None)


def _one(run_id: str, call_id: str) -> Select[Any]:
    return select(CALLS).where(CALLS.c.run_id == run_id, CALLS.c.call_id == call_id)


async def get(db: Database, run_id: str, call_id: str) -> LedgerEntry | None:
    async with db.read() as conn:
        row = (await conn.execute(_one(run_id, call_id))).mappings().first()
    return LedgerEntry.from_row(row) if row is not None else None


async def for_run(db: Database, run_id: str) -> list[LedgerEntry]:
    """The run's ledger in the order the calls started."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(CALLS)
                .where(CALLS.c.run_id == run_id)
                .order_by(CALLS.c.started_at, CALLS.c.call_id)
            )
        ).mappings().all()
    return [LedgerEntry.from_row(row) for row in rows]
