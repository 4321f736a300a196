"""Retention: finished runs are kept for a while, then purged with everything they own."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from store import schema
from store.engine import Database
from store.runs import state_is
from store.states import PURGEABLE

t = schema.runs


async def purge(db: Database, *, before: datetime, batch: int = 500) -> int:
    """Delete answered, halted and failed runs last updated before ``before``.

    Their messages, events, ledger, approvals and outbox rows go with them
    (ON DELETE CASCADE). Runs are deleted in batches so no transaction holds
    the write lock for long. Suspended and running runs are never touched.
    """
    total = 0
    while True:
        ids = (
            select(t.c.id)
            .where(state_is(*sorted(PURGEABLE)), t.c.updated_at < before)
            .limit(batch)
        )
        async with db.write() as conn:
            result = await conn.execute(
                delete(t).where(t.c.id.in_(ids.scalar_subquery()),
                                state_is(*sorted(PURGEABLE)), t.c.updated_at < before)
            )
        total += result.rowcount
        if result.rowcount < batch:
            return total
