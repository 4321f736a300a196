"""API keys: only a SHA-256 of each key is stored; revoked keys stay, marked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from store import errors, records, schema
from store.api_records import ApiKey
from store.engine import Database

keys = schema.api_keys


async def create(
    db: Database, *, key_id: str, name: str, key_hash: str, tools: Sequence[str],
    webhook_url: str | None, webhook_secret: str | None, now: datetime,
) -> ApiKey:
    """Store a new key; KeyNameTaken if ``name`` is in use (revoked keys keep their names)."""
    values = dict(id=key_id, name=name, key_hash=key_hash,
                  tools=records.dumps(list(tools), what="tool globs"), webhook_url=webhook_url,
                  webhook_secret=webhook_secret, created_at=now)
    try:
        async with db.write() as conn:
            row = (await conn.execute(insert(keys).values(**values).returning(*keys.c))
                   ).mappings().one()
    except IntegrityError as exc:
        raise errors.KeyNameTaken(name) from exc
    return ApiKey.from_row(row)


async def active_by_hash(db: Database, key_hash: str) -> ApiKey | None:
    """The unrevoked key with this hash, if any."""
    stmt = select(keys).where(keys.c.key_hash == key_hash, keys.c.revoked_at.is_(None))
    async with db.read() as conn:
        row = (await conn.execute(stmt)).mappings().first()
    return ApiKey.from_row(row) if row is not None else None


async def get(db: Database, key_id: str) -> ApiKey | None:
    async with db.read() as conn:
        row = (await conn.execute(select(keys).where(keys.c.id == key_id))).mappings().first()
    return ApiKey.from_row(row) if row is not None else None


async def list_all(db: Database) -> list[ApiKey]:
    """Every key, oldest first, revoked ones included."""
    async with db.read() as conn:
        rows = (await conn.execute(select(keys).order_by(keys.c.created_at, keys.c.name))
                ).mappings().all()
    return [ApiKey.from_row(r) for r in rows]


async def revoke(db: Database, name: str, *, now: datetime) -> bool:
    """Revoke the key called ``name``; False if there is no such unrevoked key."""
    async with db.write() as conn:
        result = await conn.execute(
            update(keys).where(keys.c.name == name, keys.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
    return result.rowcount == 1
