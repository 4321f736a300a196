"""A run that ends is not a run that worked: answered only when the route's contract holds."""

from __future__ import annotations

from collections.abc import Sequence

from examples import purchase
from resume import outcomes
from resume.messages import Message, ToolSpec
from resume.scripted import ScriptedModel, Turn
from store import events, ledger, outbox, runs
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.purchase_harness import ASK, FLOW, purchase_world


def summarise_after_approval(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
    """The incident's agent: once the mandate is approved it summarises what is there."""
    if [name for name, _ in purchase.tool_results(messages)][-1:] == ["approve_cart_mandate"]:
        return "done"
    return purchase.purchase_script(messages, tools)


async def test_contract__answer_without_checkout_fails_incomplete(db: Database) -> None:
    world = await purchase_world(db, model=ScriptedModel(summarise_after_approval))
    run = await journeys.start(world.rt, "U_BUYER", ASK)

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_BUYER")

    assert isinstance(result, outcomes.Executed)  # the approved tool itself ran
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "incomplete"
    assert final.answer is None
    assert await world.shop.orders() == []
    assert [e.tool for e in await ledger.for_run(db, run.id)] == FLOW[:4]
    notices = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "run_notice"]
    assert len(notices) == 1
    [notice] = notices
    assert notice["event"] == "failed" and notice["reason"] == "incomplete"
    assert notice["missing"] == ["complete_checkout"]
    assert [e["tool"] for e in notice["evidence"]] == FLOW[:4]
    assert not await events.for_run(db, run.id, kind="answered")
    [failed] = await events.for_run(db, run.id, kind="failed")
    assert failed.data["missing"] == ["complete_checkout"]


async def test_contract__answered_run_carries_the_evidence_in_order(db: Database) -> None:
    world = await purchase_world(db)
    run = await journeys.start(world.rt, "U_BUYER", ASK)

    await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_BUYER")

    final = await runs.get(db, run.id)
    assert final.state is RunState.answered, final.halt_reason
    [order] = await world.shop.orders("U_BUYER")
    notice = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "run_notice"][-1]
    assert notice["event"] == "answered" and notice["answer"] == final.answer
    assert notice["missing"] == []
    evidence = notice["evidence"]
    assert [e["tool"] for e in evidence] == FLOW
    assert all(e["status"] == LedgerStatus.succeeded.value for e in evidence)
    by_tool = {e["tool"]: e["fields"] for e in evidence}
    assert [e["fields"]["sku"] for e in evidence[:2]] == ["KB-100", "MN-300"]
    cart_id = by_tool["build_cart"]["cart_id"]
    mandate_id = by_tool["approve_cart_mandate"]["mandate_id"]
    assert cart_id.startswith("C-") and mandate_id == order["mandate_id"]
    assert by_tool["approve_cart_mandate"]["total"] == order["total"] == 457.0
    assert by_tool["sign_mandate"]["mandate_id"] == mandate_id
    assert by_tool["sign_mandate"]["signature"]
    assert by_tool["complete_checkout"] == {"order_id": order["order_id"],
                                            "total": 457.0, "status": "placed"}
    assert by_tool["analyse_order"]["order_id"] == order["order_id"]
    assert by_tool["analyse_order"]["units"] == 3


async def test_contract__declined_mandate_is_not_an_answered_purchase(db: Database) -> None:
    world = await purchase_world(db)
    run = await journeys.start(world.rt, "U_BUYER", ASK)

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "decline", "U_BUYER", "too expensive")

    assert isinstance(result, outcomes.Declined)
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "incomplete"
    assert await world.shop.orders() == []
    notice = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "run_notice"][-1]
    assert notice["missing"] == ["complete_checkout"]


async def test_contract__inquiry_branch_has_no_contract_and_answers(db: Database) -> None:
    world = await purchase_world(db)

    run = await journeys.start(world.rt, "U_ASKER", "what does KB-100 cost?")

    assert run.state is RunState.answered and run.route == "inquiry"
    assert run.answer and "$89.00" in run.answer
