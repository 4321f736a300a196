"""Approval records: one per approval card, kept after the decision."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store import schema
from store.engine import Database
from store.records import Approval

APPROVALS = schema.approvals


async def get_in(conn: AsyncConnection, token: str) -> Approval | None:
    stmt = select(APPROVALS).where(APPROVALS.c.token == token)
    row = (await conn.execute(stmt)).mappings().first()
    return Approval.from_row(row) if row is not None else None


async def get(db: Database, token: str) -> Approval | None:
    async with db.read() as conn:
        return await get_in(conn, token)


async def for_run(db: Database, run_id: str) -> list[Approval]:
    async with db.read() as conn:
        stmt = (select(APPROVALS).where(APPROVALS.c.run_id == run_id)
                .order_by(APPROVALS.c.created_at))
        rows = (await conn.execute(stmt)).mappings().all()
    return [Approval.from_row(r) for r in rows]


async def set_card_ref(db: Database, token: str, channel: str, ts: str) -> None:
    """Remember where the card for ``token`` was posted, so it can be updated later."""
    async with db.write() as conn:
        await conn.execute(
            update(APPROVALS)
            .where(APPROVALS.c.token == token)
            .values(slack_channel=channel, slack_ts=ts)
        )
