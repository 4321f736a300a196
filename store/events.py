"""The trace: what happened to a run, for people and for audit."""

from __future__ import annotations

from sqlalchemy import select

from store import schema
from store.engine import Database
from store.records import Event

e = schema.run_events


async def for_run(db: Database, run_id: str, *, kind: str | None = None) -> list[Event]:
    """The run's events in order, optionally only those of one kind."""
    stmt = select(e).where(e.c.run_id == run_id).order_by(e.c.seq)
    if kind is not None:
        stmt = stmt.where(e.c.kind == kind)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [Event.from_row(r) for r in rows]
