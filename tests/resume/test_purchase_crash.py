"""The purchase example survives a crash at each of its keyed writes: one mandate, one order.

A "crash" is an exception no handler in the loop catches (like a kill): the
run stays ``running`` with the tool's ledger row ``started``. Recovery takes
the run over and asks the tool's ``reconcile`` whether the write with that
idempotency key happened: if it did, its result is recorded and the write is
not made again; if not, the call runs again with the same key. Either way the
run goes on to an answer with exactly one order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from examples import purchase
from examples.shop import Shop, mandates
from resume import reap
from resume.runtime import Runtime
from store import events, ledger, outbox, runs
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.purchase_harness import ASK, FLOW

STALE = timedelta(hours=1)


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


class CrashingShop(Shop):
    """Dies once in ``crash_in``: before its write, or right after the write committed."""

    def __init__(self, db: Database, crash_in: str, when: str) -> None:
        super().__init__(db)
        self.crash_in, self.when = crash_in, when
        self.crashed = False
        self.writes: Counter[str] = Counter()

    async def _write(self, name: str, write: Callable[[], Awaitable[dict[str, Any]]]
                     ) -> dict[str, Any]:
        self.writes[name] += 1
        crash = name == self.crash_in and not self.crashed
        if crash and self.when == "before":
            self.crashed = True
            raise Crash
        result = await write()
        if crash:
            self.crashed = True
            raise Crash
        return result

    async def approve_mandate(self, cart_id: str, user_id: str, key: str) -> dict[str, Any]:
        return await self._write("approve", lambda: super(CrashingShop, self).approve_mandate(
            cart_id, user_id, key))

    async def sign_mandate(self, mandate_id: str, key: str) -> dict[str, Any]:
        return await self._write("sign", lambda: super(CrashingShop, self).sign_mandate(
            mandate_id, key))

    async def checkout(self, mandate_id: str, key: str) -> dict[str, Any]:
        return await self._write("checkout", lambda: super(CrashingShop, self).checkout(
            mandate_id, key))


#: shop write -> the tool that makes it
TOOLS = {"approve": "approve_cart_mandate", "sign": "sign_mandate",
         "checkout": "complete_checkout"}


async def _mandate_count(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(mandates))).scalar_one())


@pytest.mark.parametrize("when", ["after", "before"])
@pytest.mark.parametrize("crash_in", list(TOOLS))
async def test_purchase__a_crash_at_a_keyed_write_ends_with_exactly_one_order(
    db: Database, crash_in: str, when: str,
) -> None:
    shop = CrashingShop(db, crash_in, when)
    await shop.setup()
    app = purchase.build(shop)
    rt = Runtime(db=db, app=app, owner_id="proc_crashed")
    run = await journeys.start(rt, "U_BUYER", ASK)
    assert run.state is RunState.suspended and run.pending_token

    with pytest.raises(Crash):
        await journeys.resume_after_confirmation(rt, run.pending_token, "approve",
                                                     "U_BUYER")

    crashed = await runs.get(db, run.id)
    assert crashed.state is RunState.running
    tool = TOOLS[crash_in]
    [open_call] = [e for e in await ledger.for_run(db, run.id) if e.tool == tool]
    assert open_call.status is LedgerStatus.started
    assert len(await shop.orders()) == (1 if (crash_in, when) == ("checkout", "after") else 0)
    assert await runs.heartbeat(db, run.id, crashed.lease_epoch, now=datetime.now(UTC) - STALE)

    report = await reap.recover_orphans(Runtime(db=db, app=app, owner_id="proc_reaper"))

    assert [r.id for r in report.recovered] == [run.id]
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered, (final.halt_reason, final.answer)
    assert final.owner_id == "proc_reaper" and final.recovery_attempts == 1
    # Exactly one of everything, and the stock taken once.
    [order] = await shop.orders("U_BUYER")
    assert order["status"] == "placed" and order["total"] == 2 * 89.0 + 279.0
    assert await _mandate_count(db) == 1
    assert [(p or {}).get("stock") for p in
            [await shop.product("KB-100"), await shop.product("MN-300")]] == [23, 5]
    assert final.answer and order["order_id"] in final.answer
    # Reconciled by key: a write that happened is not made again; one that did not is.
    [reconciled] = await events.for_run(db, run.id, kind="reconciled")
    assert reconciled.data == {"call_id": open_call.call_id, "tool": tool,
                               "outcome": "done" if when == "after" else "not_done"}
    assert shop.writes == Counter({name: 2 if (name, when) == (crash_in, "before") else 1
                                   for name in TOOLS})
    entries = await ledger.for_run(db, run.id)
    assert [e.tool for e in entries] == FLOW
    assert all(e.status is LedgerStatus.succeeded for e in entries)
    [checkout] = [e for e in entries if e.tool == "complete_checkout"]
    assert checkout.result["order_id"] == order["order_id"]
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "answered"
    assert any(e["tool"] == "complete_checkout" and e["fields"].get("order_id")
               == order["order_id"] for e in notice["evidence"])
