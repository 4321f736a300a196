"""Retention: finished runs are kept for a while, then purged with everything they own."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from store import schema
from store.engine import Database
from store.states import PURGEABLE
from store.transitions import state_is

RUNS = schema.runs


async def purge(db: Database, *, before: datetime, batch: int = 500) -> int:
    """Delete answered, halted and failed runs last updated before ``before``.

    Their messages, events, ledger, approvals and outbox rows go with them
    (ON DELETE CASCADE). Runs are deleted in batches so no transaction holds
    the write lock for long. Suspended and running runs are never touched.
    """
    total = 0
    while True:
        ids = (
            select(RUNS.c.id)
            .where(state_is(*sorted(PURGEABLE)), RUNS.c.updated_at < before)
            .limit(batch)
        )
        async with db.write() as conn:
            result = await conn.execute(
                delete(RUNS).where(RUNS.c.id.in_(ids.scalar_subquery()),
                                state_is(*sorted(PURGEABLE)), RUNS.c.updated_at < before)
            )
        total += result.rowcount
        if result.rowcount < batch:
            return total
