"""The conversation: append-only, loaded whole to resume.

Appending happens inside run transitions (``Effects.messages``): one INSERT per
message, whatever the conversation's length.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from store import codec, schema
from store.engine import Database

MESSAGES = schema.run_messages


async def load(db: Database, run_id: str) -> list[dict[str, Any]]:
    """Every message of the run, in order."""
    async with db.read() as conn:
        stmt = (select(MESSAGES.c.message).where(MESSAGES.c.run_id == run_id)
                .order_by(MESSAGES.c.seq))
        rows = (await conn.execute(stmt)).all()
    return [codec.loads(r.message) for r in rows]
