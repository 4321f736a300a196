"""The purchase app on a test database: the runtime, the shop, and shortcuts to drive it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import delete, insert, update

from examples import purchase
from examples.shop import Shop
from resume.model import Model
from resume.routes import Branch, RouteDecision, RouteFunction
from resume.runtime import Runtime
from store import records, schema
from store.engine import Database
from store.events import EventKind
from store.records import Run
from tests import world

#: Two lines: check_stock x2, build_cart, approve_cart_mandate, sign_mandate,
#: complete_checkout, analyse_order -- seven tool calls when it works.
ASK = "buy 2 of KB-100 and 1 of MN-300"
FLOW = ["check_stock", "check_stock", "build_cart", "approve_cart_mandate", "sign_mandate",
        "complete_checkout", "analyse_order"]


@dataclass
class Classifier:
    """A route function that counts its calls and answers what a test sets, per call."""

    answers: list[RouteDecision | None]
    calls: list[str] = field(default_factory=list)

    async def __call__(self, question: str, user_id: str) -> RouteDecision | None:
        self.calls.append(question)
        k = min(len(self.calls), len(self.answers)) - 1
        return self.answers[k]


def decision(
    route: str, basis: str = "buy", how: Literal["model", "rule", "person"] = "rule"
) -> RouteDecision:
    return RouteDecision(route=route, basis=basis, how=how)


@dataclass
class PurchaseWorld(world.World):
    shop: Shop


async def purchase_world(
    db: Database,
    *,
    model: Model | None = None,
    route_function: RouteFunction | None = None,
    table: Mapping[str, Branch] | None = None,
    **runtime: Any,
) -> PurchaseWorld:
    shop = Shop(db)
    await shop.setup()
    app = purchase.build(shop, model, route_function, table=table)
    return PurchaseWorld(Runtime(db=db, app=app, **runtime), shop)


async def delete_route_events(db: Database, run_id: str) -> int:
    """What a lost write looks like: the run's recorded route is gone from the store."""
    e = schema.run_events
    async with db.write() as conn:
        gone = await conn.execute(delete(e).where(e.c.run_id == run_id,
                                                  e.c.kind == EventKind.route))
    return int(gone.rowcount)


async def append_event(db: Database, run: Run, kind: str, data: dict[str, Any]) -> None:
    """Append an event to ``run``'s trace behind the store's back (its seq kept consistent)."""
    r, e = schema.runs, schema.run_events
    async with db.write() as conn:
        seq = (await conn.execute(
            update(r).where(r.c.id == run.id).values(event_seq=r.c.event_seq + 1)
            .returning(r.c.event_seq))).scalar_one()
        await conn.execute(insert(e).values(run_id=run.id, seq=seq, kind=kind,
                                            data=records.dumps(data, what="event"),
                                            at=run.updated_at))
