"""Counts over the whole database, for the metrics endpoint (read-only, one query each)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from store import schema
from store.engine import Database
from store.states import LedgerStatus, OutboxState, RunState
from store.transitions import state_is

__all__ = ["Snapshot", "snapshot"]

#: Ledger statuses a row never leaves: counting them gives a count that only grows
#: (until the retention purge deletes old runs).
_SETTLED = (LedgerStatus.succeeded, LedgerStatus.failed, LedgerStatus.unknown)


class Snapshot:
    """Runs per state, outbox rows per state, settled tool calls per (tool, status), and the
    runs an operator should hear about: orphans, and requests waiting past half their time."""

    def __init__(self, runs: dict[str, int], outbox: dict[str, int],
                 tool_calls: dict[tuple[str, str], int], orphans: int = 0,
                 waiting_long: int = 0) -> None:
        self.runs = {state.value: runs.get(state.value, 0) for state in RunState}
        self.outbox = {state.value: outbox.get(state.value, 0) for state in OutboxState}
        self.tool_calls = tool_calls
        self.orphans = orphans
        self.waiting_long = waiting_long


async def snapshot(db: Database, *, stale_before: datetime, expires_before: datetime) -> Snapshot:
    """The counts now. Orphans: running runs whose heartbeat is older than ``stale_before``.
    Waiting long: suspended runs that expire before ``expires_before``."""
    r, o, t = schema.runs, schema.outbox, schema.tool_calls
    orphans = select(func.count()).select_from(r).where(
        state_is(RunState.running), r.c.heartbeat_at < stale_before)
    waiting = select(func.count()).select_from(r).where(
        state_is(RunState.suspended), r.c.expires_at < expires_before)
    async with db.read() as conn:
        runs = (await conn.execute(select(r.c.state, func.count()).group_by(r.c.state))).all()
        outbox = (await conn.execute(select(o.c.state, func.count()).group_by(o.c.state))).all()
        calls = (await conn.execute(
            select(t.c.tool, t.c.status, func.count())
            .where(t.c.status.in_([s.value for s in _SETTLED]))
            .group_by(t.c.tool, t.c.status))).all()
        orphaned = int((await conn.execute(orphans)).scalar_one())
        waiting_long = int((await conn.execute(waiting)).scalar_one())
    return Snapshot(
        runs={str(state): int(n) for state, n in runs},
        outbox={str(state): int(n) for state, n in outbox},
        tool_calls={(str(tool), str(status)): int(n) for tool, status, n in calls},
        orphans=orphaned,
        waiting_long=waiting_long,
    )
