"""Routes are recovered, never re-decided: the incident's purchase, paused and resumed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import update

from examples import purchase
from resume import decide, drive, outcomes, reap
from resume.messages import Message, ToolSpec
from resume.model import ModelError
from resume.routes import Branch, RouteDecision
from resume.runtime import Runtime
from resume.scripted import ScriptedModel
from store import events, ledger, outbox, runs, schema, sweeps
from store.engine import Database
from store.events import EventKind
from store.records import Run
from store.states import LedgerStatus, RunState
from store.transitions import Effects
from tests import journeys
from tests.purchase_harness import (
    ASK,
    FLOW,
    Classifier,
    PurchaseWorld,
    append_event,
    decision,
    delete_route_events,
    purchase_world,
)


async def _notices(db: Database, run_id: str) -> list[dict[str, object]]:
    return [r.payload for r in await outbox.for_run(db, run_id) if r.kind == "run_notice"]


async def _approve(world: PurchaseWorld, run: Run) -> outcomes.CallOutcome | outcomes.Refusal:
    assert run.state is RunState.suspended, run.halt_reason
    return await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", run.user_id)


async def _assert_failed_without_order(
    world: PurchaseWorld, run: Run, reason: str
) -> dict[str, object]:
    final = await runs.get(world.rt.db, run.id)
    assert final.state is RunState.failed and final.halt_reason == reason
    assert final.answer is None
    assert await world.shop.orders() == []
    assert not [e for e in await ledger.for_run(world.rt.db, run.id)
                if e.tool in ("sign_mandate", "complete_checkout", "analyse_order")]
    notices = await _notices(world.rt.db, run.id)
    assert [(n["event"], n["reason"]) for n in notices] == [("failed", reason)]
    assert not await events.for_run(world.rt.db, run.id, kind="answered")
    return notices[0]


async def test_route__resumed_invocation_reuses_the_route_it_took(db: Database) -> None:
    # Production after a pause: the route function knows nothing any more.
    classify = Classifier([decision("purchase"), None])
    world = await purchase_world(db, route_function=classify)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    assert run.state is RunState.suspended and run.route == "purchase"
    assert (await world.pending(run)).tool == "approve_cart_mandate"

    result = await _approve(world, run)

    assert isinstance(result, outcomes.Executed)
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered, final.halt_reason
    assert classify.calls == [ASK]
    [order] = await world.shop.orders("U_BUYER")
    assert order["status"] == "placed" and order["total"] == 2 * 89.0 + 279.0
    entries = await ledger.for_run(db, run.id)
    assert len(entries) >= 7
    assert [e.tool for e in entries] == FLOW
    assert all(e.status is LedgerStatus.succeeded for e in entries)
    router = world.rt.app.router
    assert router is not None
    [route] = await events.for_run(db, run.id, kind=EventKind.route)
    assert route.data == {"router": "supervisor", "route": "purchase", "basis": "buy",
                          "how": "rule", "table_digest": router.digest()}
    assert not await events.for_run(db, run.id, kind="failed")
    assert final.answer and order["order_id"] in final.answer


async def test_route__recovery_does_not_re_decide(db: Database) -> None:
    # A fresh classification would now pick the other branch; it must not be asked.
    classify = Classifier([decision("purchase"), decision("inquiry", "is", "model")])
    world = await purchase_world(db, route_function=classify)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    claimed = await decide.decide(world.rt, run.pending_token or "", "approve", "U_BUYER")
    assert isinstance(claimed, outcomes.Claimed)
    # The process that claimed it dies before resuming: its heartbeat goes stale.
    r = schema.runs
    async with db.write() as conn:
        await conn.execute(update(r).where(r.c.id == run.id)
                           .values(heartbeat_at=world.rt.now() - timedelta(minutes=5)))
    rescuer = Runtime(db=db, app=world.rt.app)
    now = rescuer.now()
    taken = await sweeps.take_over_orphans(
        db, now=now, stale_before=now - rescuer.orphan_after, owner_id=rescuer.owner_id,
        max_attempts=rescuer.max_recovery_attempts, exhausted_effects=lambda _: Effects(),
        taken_effects=lambda before: Effects(events=[("recovered", {"from": before.owner_id})]),
    )
    [held] = taken.taken
    assert held.owner_id == rescuer.owner_id and held.recovery_attempts == 1

    driven = await drive.drive(rescuer, held)

    assert driven.run.state is RunState.answered, driven.run.halt_reason
    assert driven.run.route == "purchase"
    assert classify.calls == [ASK]
    assert len(await world.shop.orders("U_BUYER")) == 1
    assert [e.tool for e in await ledger.for_run(db, run.id)] == FLOW
    routes = await events.for_run(db, run.id, kind=EventKind.route)
    assert [e.data["route"] for e in routes] == ["purchase"]


async def test_route__route_from_another_run_or_router_is_not_used(db: Database) -> None:
    world = await purchase_world(db)
    other = await journeys.start(world.rt, "U_OTHER", ASK)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    [theirs] = await events.for_run(db, other.id, kind=EventKind.route)
    assert theirs.data["router"] == "supervisor"
    assert await delete_route_events(db, run.id) == 1
    # Same route, same table digest, but recorded by a different router of this run.
    await append_event(db, run, EventKind.route, {**theirs.data, "router": "triage"})

    await _approve(world, run)

    notice = await _assert_failed_without_order(world, run, "route_lost")
    assert "supervisor" in str(notice["detail"])
    # The other run still has its own route and carries on down it.
    await _approve(world, other)
    assert (await runs.get(db, other.id)).state is RunState.answered
    assert [o["user_id"] for o in await world.shop.orders()] == ["U_OTHER"]


async def test_route__table_changed_underneath_a_paused_run_fails_route_table_changed(
    db: Database,
) -> None:
    world = await purchase_world(db)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    # A deploy while the card waits: the purchase branch no longer analyses orders.
    changed = dict(purchase.ROUTES)
    changed["purchase"] = Branch(
        instructions=purchase.ROUTES["purchase"].instructions,
        tools=[t for t in purchase.ROUTES["purchase"].tools if t != "analyse_order"],
        contract=purchase.ROUTES["purchase"].contract,
    )
    redeployed = await purchase_world(db, table=changed)
    assert redeployed.rt.app.router and world.rt.app.router
    assert redeployed.rt.app.router.digest() != world.rt.app.router.digest()

    result = await _approve(redeployed, run)

    assert isinstance(result, outcomes.Stopped)
    notice = await _assert_failed_without_order(redeployed, run, "route_table_changed")
    assert "purchase" in str(notice["detail"])
    assert [e.tool for e in await ledger.for_run(db, run.id)] == FLOW[:3]
    assert not await world.shop.orders()


async def test_route__lost_route_fails_route_lost(db: Database) -> None:
    classify = Classifier([decision("purchase"), decision("purchase")])
    world = await purchase_world(db, route_function=classify)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    assert await delete_route_events(db, run.id) == 1

    result = await _approve(world, run)

    assert isinstance(result, outcomes.Stopped)
    await _assert_failed_without_order(world, run, "route_lost")
    # Not silently re-decided, even though the route function would have answered.
    assert classify.calls == [ASK]
    kinds = [r.kind for r in await outbox.for_run(db, run.id)]
    assert kinds == ["approval_card", "card_update", "run_notice"]


async def test_route__no_route_on_a_fresh_run_fails_loudly(db: Database) -> None:
    classify = Classifier([None])
    world = await purchase_world(db, route_function=classify)

    run = await journeys.start(world.rt, "U_BUYER", ASK)

    assert run.state is RunState.failed and run.halt_reason == "no_route"
    assert classify.calls == [ASK]
    assert run.step == 0 and not await ledger.for_run(db, run.id)
    assert not await events.for_run(db, run.id, kind=EventKind.route)
    notices = await _notices(db, run.id)
    assert [(n["event"], n["reason"]) for n in notices] == [("failed", "no_route")]
    assert await world.shop.orders() == []


async def test_route__default_rule_routes_questions_to_a_branch_that_cannot_buy(
    db: Database,
) -> None:
    world = await purchase_world(db)

    run = await journeys.start(world.rt, "U_ASKER", "is MN-300 in stock?")

    assert run.state is RunState.answered and run.route == "inquiry"
    [route] = await events.for_run(db, run.id, kind=EventKind.route)
    assert route.data["how"] == "rule" and route.data["basis"] == "is"
    assert [e.tool for e in await ledger.for_run(db, run.id)] == ["check_stock"]
    assert run.answer and "6 in stock" in run.answer
    assert await world.shop.orders() == []


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


@dataclass
class FirstCallFails:
    """The purchase agent, except that its first model call raises ``error``."""

    error: BaseException
    calls: int = 0

    def __call__(self, messages_: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        self.calls += 1
        if self.calls == 1:
            raise self.error
        return purchase.purchase_script(messages_, tools)


async def _assert_continues_down_the_recorded_route(
    world: PurchaseWorld, run_id: str, classify: Classifier
) -> None:
    run = await runs.get(world.rt.db, run_id)
    assert run.state is RunState.suspended, run.halt_reason
    assert run.route == "purchase"
    assert (await world.pending(run)).tool == "approve_cart_mandate"
    assert isinstance(await _approve(world, run), outcomes.Executed)
    final = await runs.get(world.rt.db, run_id)
    assert final.state is RunState.answered, final.halt_reason
    assert [e.tool for e in await ledger.for_run(world.rt.db, run_id)] == FLOW
    assert len(await world.shop.orders("U_BUYER")) == 1
    # Asked once, at start; a fresh classification (inquiry) was never sought.
    assert classify.calls == [ASK]
    routes = await events.for_run(world.rt.db, run_id, kind=EventKind.route)
    assert [(e.data["route"], e.data["how"]) for e in routes] == [("purchase", "rule")]


async def test_route__crash_in_the_first_model_call_is_recovered_down_the_recorded_route(
    db: Database,
) -> None:
    classify = Classifier([decision("purchase"), decision("inquiry", "is", "model")])
    world = await purchase_world(db, model=ScriptedModel(FirstCallFails(Crash())),
                                 route_function=classify)
    with pytest.raises(Crash):
        await journeys.start(world.rt, "U_BUYER", ASK)
    [run] = await runs.list_runs(db)
    assert run.state is RunState.running and run.step == 0
    # The route is on record before any step, with the run itself.
    [route] = await events.for_run(db, run.id, kind=EventKind.route)
    router = world.rt.app.router
    assert router is not None
    assert route.run_id == run.id and route.data == {
        "router": "supervisor", "route": "purchase", "basis": "buy", "how": "rule",
        "table_digest": router.digest()}
    assert run.route == "purchase"
    await runs.heartbeat(db, run.id, run.lease_epoch, now=world.rt.now() - timedelta(hours=1))

    report = await reap.recover_orphans(world.rt)

    assert [r.id for r in report.recovered] == [run.id]
    await _assert_continues_down_the_recorded_route(world, run.id, classify)


async def test_route__model_error_in_the_first_model_call_continues_down_the_recorded_route(
    db: Database,
) -> None:
    classify = Classifier([decision("purchase"), decision("inquiry", "is", "model")])
    world = await purchase_world(
        db, model=ScriptedModel(FirstCallFails(ModelError("upstream 503"))),
        route_function=classify)
    run = await journeys.start(world.rt, "U_BUYER", ASK)
    assert run.state is RunState.halted and run.halt_reason == "model_error"
    assert run.step == 0

    continued = await journeys.continue_run(world.rt, run.id, "U_BUYER")

    assert isinstance(continued, outcomes.Continued)
    await _assert_continues_down_the_recorded_route(world, run.id, classify)


async def test_route__a_route_function_that_raises_fails_the_run_no_route(db: Database) -> None:
    async def broken(question: str, user_id: str) -> RouteDecision | None:
        raise ModelError("classifier timed out")

    world = await purchase_world(db, route_function=broken)

    run = await journeys.start(world.rt, "U_BUYER", ASK)

    assert run.state is RunState.failed and run.halt_reason == "no_route"
    assert run.step == 0 and not await events.for_run(db, run.id, kind=EventKind.route)
    [notice] = await _notices(db, run.id)
    assert notice["reason"] == "no_route" and "classifier timed out" in str(notice["detail"])
    assert await world.shop.orders() == []
