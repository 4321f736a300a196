"""The purchase example's own tables: a catalogue, carts, cart mandates and orders.

This stands in for a team's real commerce backend. It lives in the same
database as signoff's store (its own tables, prefixed ``shop_``) so that tests
can count real, durable orders. Every write that matters is keyed by the
signoff idempotency key of the tool call that made it, so a crash between the
write and the ledger's record of it can be reconciled instead of repeated.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    select,
    update,
)

from examples.models import one_row, row_by
from resume import Database

metadata = MetaData()

products = Table(
    "shop_products", metadata,
    Column("sku", String(40), primary_key=True),
    Column("name", String(100), nullable=False),
    Column("unit_price", Float, nullable=False),
    Column("stock", Integer, nullable=False),
)
carts = Table(
    "shop_carts", metadata,
    Column("id", String(40), primary_key=True),
    Column("user_id", String(64), nullable=False),
    #: [{"sku", "name", "quantity", "unit_price"}] at the prices when the cart was built.
    Column("items", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
mandates = Table(
    "shop_mandates", metadata,
    Column("id", String(40), primary_key=True),
    Column("cart_id", String(40), nullable=False),
    Column("user_id", String(64), nullable=False),
    #: The lines and total as approved: what the signature and the order are bound to.
    Column("items", JSON, nullable=False),
    Column("total", Float, nullable=False),
    Column("status", String(10), nullable=False),  # approved | signed | used
    Column("approve_key", String(200), nullable=False, unique=True),
    Column("signature", String(80)),
    Column("sign_key", String(200), unique=True),
    Column("approved_at", DateTime(timezone=True), nullable=False),
)
orders = Table(
    "shop_orders", metadata,
    Column("id", String(40), primary_key=True),
    Column("mandate_id", String(40), nullable=False, unique=True),
    Column("user_id", String(64), nullable=False),
    Column("items", JSON, nullable=False),
    Column("total", Float, nullable=False),
    Column("status", String(10), nullable=False),
    Column("checkout_key", String(200), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

#: sku -> (name, unit price, stock)
CATALOGUE = {
    "KB-100": ("Mechanical keyboard", 89.0, 25),
    "MS-200": ("Wireless mouse", 34.5, 40),
    "MN-300": ("27-inch monitor", 279.0, 6),
    "HD-400": ("USB-C dock", 149.0, 0),
}


class ShopError(RuntimeError):
    """A shop write was refused; the message says what to do instead."""


@dataclass(frozen=True)
class Line:
    sku: str
    name: str
    quantity: int
    unit_price: float

    @property
    def amount(self) -> float:
        return round(self.unit_price * self.quantity, 2)


def total_of(lines: list[Line]) -> float:
    return round(sum(line.amount for line in lines), 2)


def lines_of(items: list[dict[str, Any]]) -> list[Line]:
    return [Line(i["sku"], i["name"], int(i["quantity"]), float(i["unit_price"])) for i in items]


def _items(lines: list[Line]) -> list[dict[str, Any]]:
    return [{"sku": ln.sku, "name": ln.name, "quantity": ln.quantity,
             "unit_price": ln.unit_price} for ln in lines]


class Shop:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._ready = False
        self._lock = asyncio.Lock()

    async def ready(self) -> Shop:
        """The shop, its tables created on first use (an app factory cannot await)."""
        if not self._ready:
            async with self._lock:
                if not self._ready:
                    await self.setup()
        return self

    async def setup(self) -> None:
        """Create the tables and seed the catalogue (idempotent)."""
        async with self.db.write() as conn:
            await conn.run_sync(metadata.create_all)
            existing = set((await conn.execute(select(products.c.sku))).scalars())
            rows = [{"sku": s, "name": n, "unit_price": p, "stock": q}
                    for s, (n, p, q) in CATALOGUE.items() if s not in existing]
            if rows:
                await conn.execute(insert(products), rows)
        self._ready = True

    async def product(self, sku: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            return await one_row(
                conn, select(products).where(func.upper(products.c.sku) == sku.upper()))

    async def set_price(self, sku: str, unit_price: float) -> None:
        async with self.db.write() as conn:
            await conn.execute(update(products).where(products.c.sku == sku)
                               .values(unit_price=unit_price))

    async def set_stock(self, sku: str, stock: int) -> None:
        async with self.db.write() as conn:
            await conn.execute(update(products).where(products.c.sku == sku).values(stock=stock))

    async def current_lines(self, cart_id: str) -> list[Line]:
        """The cart's lines at today's catalogue prices (what an approval must show)."""
        cart = await self.cart(cart_id)
        if cart is None:
            raise ShopError(f"no cart {cart_id}; build a cart first")
        lines: list[Line] = []
        for item in lines_of(cart["items"]):
            product = await self.product(item.sku)
            if product is None:
                raise ShopError(f"{item.sku} is no longer sold; rebuild the cart")
            lines.append(Line(item.sku, item.name, item.quantity, float(product["unit_price"])))
        return lines

    async def build_cart(self, user_id: str, wanted: list[tuple[str, int]]) -> dict[str, Any]:
        lines: list[Line] = []
        for sku, quantity in wanted:
            product = await self.product(sku)
            if product is None:
                raise ShopError(f"unknown SKU {sku}")
            lines.append(Line(product["sku"], product["name"], quantity,
                              float(product["unit_price"])))
        cart_id = f"C-{secrets.token_hex(3).upper()}"
        async with self.db.write() as conn:
            await conn.execute(insert(carts).values(id=cart_id, user_id=user_id,
                                                    items=_items(lines),
                                                    created_at=datetime.now(UTC)))
        return {"cart_id": cart_id, "items": _items(lines), "total": total_of(lines)}

    async def cart(self, cart_id: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            return await row_by(conn, carts.c.id, cart_id)

    async def approve_mandate(self, cart_id: str, user_id: str, key: str) -> dict[str, Any]:
        """Record the cart mandate as approved at today's prices; a repeated key is a no-op."""
        lines = await self.current_lines(cart_id)
        async with self.db.write() as conn:
            if await row_by(conn, mandates.c.approve_key, key) is None:
                await conn.execute(insert(mandates).values(
                    id=f"M-{secrets.token_hex(3).upper()}", cart_id=cart_id, user_id=user_id,
                    items=_items(lines), total=total_of(lines), status="approved",
                    approve_key=key, approved_at=datetime.now(UTC)))
        found = await self.mandate_with_key(key)
        assert found is not None
        return found

    async def mandate_with_key(self, key: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = await row_by(conn, mandates.c.approve_key, key)
        return _mandate(row) if row else None

    async def sign_mandate(self, mandate_id: str, key: str) -> dict[str, Any]:
        """approved -> signed; the signature binds the approved lines and total."""
        async with self.db.write() as conn:
            row = await row_by(conn, mandates.c.id, mandate_id)
            if row is None:
                raise ShopError(f"no mandate {mandate_id}")
            if row["sign_key"] is None:
                if row["status"] != "approved":
                    raise ShopError(f"mandate {mandate_id} is {row['status']}, not approved")
                signature = hashlib.sha256(
                    f"{mandate_id}:{row['total']}:{row['items']}".encode()).hexdigest()[:32]
                await conn.execute(update(mandates).where(mandates.c.id == mandate_id)
                                   .values(status="signed", signature=signature, sign_key=key))
            elif row["sign_key"] != key:
                raise ShopError(f"mandate {mandate_id} was already signed by another call")
        found = await self.signed_with_key(key)
        assert found is not None
        return found

    async def signed_with_key(self, key: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = await row_by(conn, mandates.c.sign_key, key)
        return _mandate(row) if row else None

    async def checkout(self, mandate_id: str, key: str) -> dict[str, Any]:
        """Place the order for a signed mandate and take the stock, in one transaction.

        The checkout key is unique: the same call placing twice finds its order.
        """
        async with self.db.write() as conn:
            if await row_by(conn, orders.c.checkout_key, key) is None:
                mandate = await row_by(conn, mandates.c.id, mandate_id)
                if mandate is None or mandate["status"] != "signed":
                    state = "missing" if mandate is None else mandate["status"]
                    raise ShopError(f"mandate {mandate_id} is {state}; sign it before checkout")
                for line in lines_of(mandate["items"]):
                    taken = await conn.execute(
                        update(products)
                        .where(products.c.sku == line.sku, products.c.stock >= line.quantity)
                        .values(stock=products.c.stock - line.quantity))
                    if taken.rowcount != 1:
                        raise ShopError(f"{line.sku} no longer has {line.quantity} in stock")
                await conn.execute(insert(orders).values(
                    id=f"O-{secrets.token_hex(4).upper()}", mandate_id=mandate_id,
                    user_id=mandate["user_id"], items=mandate["items"], total=mandate["total"],
                    status="placed", checkout_key=key, created_at=datetime.now(UTC)))
                await conn.execute(update(mandates).where(mandates.c.id == mandate_id)
                                   .values(status="used"))
        found = await self.order_with_key(key)
        assert found is not None
        return found

    async def order_with_key(self, key: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = await row_by(conn, orders.c.checkout_key, key)
        return _order(row) if row else None

    async def order(self, order_id: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = await row_by(conn, orders.c.id, order_id)
        return _order(row) if row else None

    async def orders(self, user_id: str | None = None) -> list[dict[str, Any]]:
        stmt = select(orders).order_by(orders.c.created_at)
        if user_id is not None:
            stmt = stmt.where(orders.c.user_id == user_id)
        async with self.db.read() as conn:
            return [_order(dict(r)) for r in (await conn.execute(stmt)).mappings()]


def _mandate(row: dict[str, Any]) -> dict[str, Any]:
    return {"mandate_id": row["id"], "cart_id": row["cart_id"], "total": row["total"],
            "status": row["status"], "signature": row["signature"]}


def _order(row: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": row["id"], "mandate_id": row["mandate_id"], "user_id": row["user_id"],
            "items": row["items"], "total": row["total"], "status": row["status"]}
