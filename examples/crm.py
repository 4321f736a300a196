"""The quotes example's own tables: accounts, users' permissions and quotes.

This stands in for a team's real CRM. It lives in the same database as
signoff's store (its own tables, prefixed ``crm_``) so that crash tests can
count real, durable writes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from examples.models import one_row, row_by
from resume import Database

metadata = MetaData()

accounts = Table(
    "crm_accounts", metadata,
    Column("name", String(100), primary_key=True),
    Column("discount_tier", String(20), nullable=False),
    Column("credit_hold", Boolean, nullable=False, default=False),
)
users = Table(
    "crm_users", metadata,
    Column("user_id", String(64), primary_key=True),
    Column("can_send_quotes", Boolean, nullable=False),
)
quotes = Table(
    "crm_quotes", metadata,
    Column("id", String(40), primary_key=True),
    Column("account", String(100), nullable=False),
    Column("sku", String(40), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("unit_price", Float, nullable=False),
    Column("discount_pct", Float, nullable=False),
    Column("total", Float, nullable=False),
    Column("status", String(10), nullable=False),
    Column("send_key", String(200), unique=True),
    Column("sent_at", DateTime(timezone=True)),
    #: The drafting call's idempotency key: drafting again with it returns the same quote.
    Column("draft_key", String(200)),
)
draft_key_index = Index("ux_crm_quotes_draft_key", quotes.c.draft_key, unique=True)

TIERS = {"standard": 0.0, "silver": 5.0, "gold": 10.0, "platinum": 15.0}
PRICES = {"SKU-4411": 12.5, "SKU-1000": 99.0, "SKU-2020": 4.25}
SEED = {"Henderson": "gold", "Acme": "silver", "Globex": "standard"}


@dataclass(frozen=True)
class Pricing:
    unit_price: float
    discount_tier: str
    discount_pct: float
    total: float


def price(sku: str, quantity: int, tier: str) -> Pricing:
    unit = PRICES[sku]
    pct = TIERS[tier]
    return Pricing(unit, tier, pct, round(unit * quantity * (1 - pct / 100), 2))


class CRM:
    #: The discount tiers the sandbox page's panel offers.
    tiers: tuple[str, ...] = tuple(TIERS)

    def __init__(self, db: Database) -> None:
        self.db = db
        self._ready = False

    async def ready(self) -> CRM:
        """The CRM with its tables created (``signoff serve`` never calls ``setup`` itself)."""
        if not self._ready:
            await self.setup()
            self._ready = True
        return self

    async def setup(self) -> None:
        """Create the tables and seed the demo accounts (idempotent)."""
        async with self.db.write() as conn:
            await conn.run_sync(metadata.create_all)
            await conn.run_sync(_add_draft_key)
            existing = set((await conn.execute(select(accounts.c.name))).scalars())
            rows = [{"name": n, "discount_tier": t, "credit_hold": False}
                    for n, t in SEED.items() if n not in existing]
            if rows:
                await conn.execute(insert(accounts), rows)

    async def account(self, name: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            return await one_row(
                conn, select(accounts).where(func.lower(accounts.c.name) == name.lower()))

    async def all_accounts(self) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            rows = (await conn.execute(select(accounts).order_by(accounts.c.name))).mappings()
            return [dict(r) for r in rows]

    async def set_credit_hold(self, name: str, hold: bool) -> None:
        async with self.db.write() as conn:
            await conn.execute(update(accounts).where(accounts.c.name == name)
                               .values(credit_hold=hold))

    async def set_tier(self, name: str, tier: str) -> None:
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; one of {sorted(TIERS)}")
        async with self.db.write() as conn:
            await conn.execute(update(accounts).where(accounts.c.name == name)
                               .values(discount_tier=tier))

    async def can_send(self, user_id: str) -> bool:
        async with self.db.read() as conn:
            row = (await conn.execute(
                select(users.c.can_send_quotes).where(users.c.user_id == user_id))).first()
        return True if row is None else bool(row.can_send_quotes)

    async def set_can_send(self, user_id: str, allowed: bool) -> None:
        async with self.db.write() as conn:
            await conn.execute(users.delete().where(users.c.user_id == user_id))
            await conn.execute(insert(users).values(user_id=user_id, can_send_quotes=allowed))

    async def draft(self, account: str, sku: str, quantity: int, tier: str,
                    key: str) -> dict[str, Any]:
        """Draft a quote; drafting again with the same ``key`` returns the first draft."""
        p = price(sku, quantity, tier)
        row = {"id": f"Q-{secrets.token_hex(5).upper()}", "account": account, "sku": sku,
               "quantity": quantity, "unit_price": p.unit_price, "discount_pct": p.discount_pct,
               "total": p.total, "status": "draft", "draft_key": key}
        try:
            async with self.db.write() as conn:
                found = await row_by(conn, quotes.c.draft_key, key)
                if found is not None:
                    return found
                await conn.execute(insert(quotes).values(**row))
        except IntegrityError:  # the same key drafted at the same moment elsewhere: that one
            async with self.db.read() as conn:
                found = await row_by(conn, quotes.c.draft_key, key)
            if found is None:
                raise
            return found
        return row

    async def quote(self, quote_id: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            return await row_by(conn, quotes.c.id, quote_id)

    async def send(self, quote_id: str, pricing: Pricing, key: str) -> dict[str, Any]:
        """Mark the quote sent at today's terms; the key makes a second send a no-op."""
        async with self.db.write() as conn:
            if await row_by(conn, quotes.c.send_key, key) is None:
                await conn.execute(
                    update(quotes).where(quotes.c.id == quote_id, quotes.c.status == "draft")
                    .values(status="sent", send_key=key, unit_price=pricing.unit_price,
                            discount_pct=pricing.discount_pct, total=pricing.total,
                            sent_at=datetime.now(UTC))
                )
        found = await self.sent_with_key(key)
        if found is None:
            raise RuntimeError(f"quote {quote_id} is not a draft; nothing was sent")
        return found

    async def sent_with_key(self, key: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = await row_by(conn, quotes.c.send_key, key)
        return _public(row) if row else None

    async def sent_count(self, account: str | None = None) -> int:
        stmt = select(func.count()).select_from(quotes).where(quotes.c.status == "sent")
        if account is not None:
            stmt = stmt.where(quotes.c.account == account)
        async with self.db.read() as conn:
            return int((await conn.execute(stmt)).scalar_one())


def _add_draft_key(conn: Connection) -> None:
    """Databases made before drafts were keyed get the column and its unique index."""
    if "draft_key" not in {c["name"] for c in inspect(conn).get_columns(quotes.name)}:
        conn.execute(text(f"ALTER TABLE {quotes.name} ADD COLUMN draft_key VARCHAR(200)"))
    draft_key_index.create(conn, checkfirst=True)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {"quote_id": row["id"], "account": row["account"], "sku": row["sku"],
            "quantity": row["quantity"], "total": row["total"], "status": row["status"]}
