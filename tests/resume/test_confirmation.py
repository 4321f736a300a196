from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from resume import decide, expire, outcomes
from resume.messages import Message
from resume.runtime import Runtime
from store import claims, events, ledger, outbox, runs
from store.engine import Database
from store.reasons import RefusalReason
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world


async def test_quote__approve_sends_once_and_answers_with_evidence(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended
    assert await world.crm.sent_count() == 0
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(result, outcomes.Executed)
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered, final.halt_reason
    assert await world.crm.sent_count("Henderson") == 1
    assert final.answer and "Sent quote" in final.answer
    kinds = [r.kind for r in await outbox.for_run(db, run.id)]
    assert kinds == ["approval_card", "card_update", "run_notice"]
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "answered"
    assert [e["tool"] for e in notice["evidence"]] == ["lookup_account", "draft_quote",
                                                       "send_quote"]


async def test_quote__twenty_concurrent_approvals_resume_once(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    results = await asyncio.gather(*(
        journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve",
                                               "U_REP")
        for _ in range(20)
    ))
    assert sum(isinstance(r, outcomes.Executed) for r in results) == 1
    assert sum(isinstance(r, outcomes.AlreadyResumed) for r in results) == 19
    assert await world.crm.sent_count() == 1
    sends = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert len(sends) == 1 and sends[0].status is LedgerStatus.succeeded


async def test_quote__resumed_run_keeps_its_spent_budget(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    before = await runs.get(db, run.id)
    assert before.spend_usd > 0 and before.tool_calls == 2 and before.step == 3
    await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve",
                                                 "U_REP")
    after = await runs.get(db, run.id)
    assert after.spend_usd > before.spend_usd
    assert after.tool_calls == before.tool_calls + 1
    assert after.elapsed_ms >= before.elapsed_ms
    assert after.step == before.step + 1


async def test_quote__discount_changed_while_waiting_resuspends_with_diff(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    await world.crm.set_tier("Henderson", "silver")
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(result, outcomes.DetailsChanged)
    fields = {c.field for c in result.changes}
    assert "Discount tier" in fields and "Total" in fields
    after = await runs.get(db, run.id)
    assert after.state is RunState.suspended and after.pending_token != run.pending_token
    assert await world.crm.sent_count() == 0
    cards = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert len(cards) == 2 and cards[1]["diff"] and cards[1]["replaces_token"] == run.pending_token
    # the old card cannot be used again; the new one can
    stale = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(stale, outcomes.AlreadyResumed)
    fresh = await journeys.resume_after_confirmation(
        world.rt, after.pending_token or "", "approve", "U_REP")
    assert isinstance(fresh, outcomes.Executed)
    assert await world.crm.sent_count() == 1


async def test_quote__credit_hold_while_waiting_reaches_the_model(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    await world.crm.set_credit_hold("Henderson", True)
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(result, outcomes.Blocked) and result.code == "credit_hold"
    assert await world.crm.sent_count() == 0
    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    tool_msgs = [m for m in convo if m.role == "tool" and m.name == "send_quote"]
    assert tool_msgs and "credit_hold" in (tool_msgs[-1].content or "")
    # The agent's last word mentions the hold, but no quote went out: the run failed.
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "incomplete"
    [notice] = [r.payload for r in await outbox.for_run(db, run.id)
                if r.payload.get("event") == "failed"]
    assert notice["missing"] == ["send_quote"] and "credit hold" in notice["detail"]


async def test_quote__guard_refusing_before_the_card_never_asks_a_person(db: Database) -> None:
    """An account already on credit hold: no card is posted, and the model gets the guard's
    answer as the send's result."""
    world = await quotes_world(db)
    await world.crm.set_credit_hold("Henderson", True)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.failed and run.pending_token is None
    kinds = [r.kind for r in await outbox.for_run(db, run.id)]
    assert "approval_card" not in kinds
    assert await claims.approvals_of(db, run.id) == []
    assert await world.crm.sent_count() == 0
    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    [sent] = [m for m in convo if m.role == "tool" and m.name == "send_quote"]
    assert "credit_hold" in (sent.content or "") and "Henderson is on credit hold" in (
        sent.content or "")
    assert [e.kind for e in await events.for_run(db, run.id)].count("guard_failed") == 1


async def test_quote__changed_details_the_guard_refuses_are_not_asked_about_again(
    db: Database,
) -> None:
    """While the card waits the tier changes (a new card would ask again) and a credit hold
    lands: the guard's refusal wins, and no second card is posted."""
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    await world.crm.set_tier("Henderson", "silver")
    await world.crm.set_credit_hold("Henderson", True)
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(result, outcomes.Blocked) and result.code == "credit_hold"
    assert [r.kind for r in await outbox.for_run(db, run.id)].count("approval_card") == 1
    assert len(await claims.approvals_of(db, run.id)) == 1
    assert await world.crm.sent_count() == 0


async def test_quote__permission_revoked_while_waiting_halts(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    await world.crm.set_can_send("U_REP", False)
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(result, outcomes.NoLongerPermitted)
    final = await runs.get(db, run.id)
    assert final.state is RunState.halted and final.halt_reason == "no_longer_permitted"
    assert await world.crm.sent_count() == 0


async def test_quote__decline_with_reason_reaches_the_model(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "decline", "U_REP", "wrong SKU")
    assert isinstance(result, outcomes.Declined) and result.reason == "wrong SKU"
    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    last_tool = [m for m in convo if m.role == "tool"][-1]
    assert "declined_by_user" in (last_tool.content or "")
    assert "wrong SKU" in (last_tool.content or "")
    assert await world.crm.sent_count() == 0


async def test_quote__non_approver_changes_nothing(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    refused = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_OTHER")
    assert isinstance(refused, outcomes.NotAnApprover)
    same = await runs.get(db, run.id)
    assert same.state is RunState.suspended and same.lease_epoch == run.lease_epoch
    assert not await events.for_run(db, run.id, kind="decision")
    ok = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(ok, outcomes.Executed)
    assert await world.crm.sent_count() == 1


async def test_quote__unknown_token_is_refused(db: Database) -> None:
    world = await quotes_world(db)
    result = await journeys.resume_after_confirmation(world.rt, "nope", "approve", "U_REP")
    assert result == outcomes.UnknownOrExpired(RefusalReason.unknown)


async def test_quote__revoked_while_expired_is_not_asked_again_on_continue(db: Database) -> None:
    from datetime import timedelta


    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.expires_at is not None
    await expire.expire_suspended(world.rt, now=run.expires_at + timedelta(seconds=1))
    await world.crm.set_can_send("U_REP", False)

    result = await journeys.continue_run(world.rt, run.id, "U_REP")

    assert isinstance(result, outcomes.Continued)
    cards = [r for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert len(cards) == 1  # no second card for a call the requester may no longer make
    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    assert "not_permitted" in (convo[-2].content or "")
    assert await world.crm.sent_count() == 0


async def test_quote__vanished_tool_still_only_lets_the_requester_decide(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert (await world.pending(run)).tool == "send_quote"
    # A deploy while the card waits drops the pending call's tool from the app.
    app = world.rt.app
    redeployed = Runtime(db=db, app=dataclasses.replace(
        app, tools=[t for t in app.tools if t.name != "send_quote"], contract=[]))
    assert redeployed.app.tool("send_quote") is None
    token = run.pending_token or ""

    assert await decide.refusal(redeployed, token, "U_OTHER") == outcomes.NotAnApprover(
        "U_OTHER", "U_REP", None)
    refused = await decide.decide(redeployed, token, "approve", "U_OTHER")

    assert refused == outcomes.NotAnApprover("U_OTHER", "U_REP", None)
    same = await runs.get(db, run.id)
    assert same.state is RunState.suspended and same.lease_epoch == run.lease_epoch
    assert not await events.for_run(db, run.id, kind="decision")
    assert (await world.pending(same)).decided_by is None
    # The requester still decides (and the loop then fails the vanished call loudly).
    assert isinstance(await decide.decide(redeployed, token, "decline", "U_REP"),
                      outcomes.Claimed)
    assert await world.crm.sent_count() == 0


class _Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


async def test_quote__expired_token_is_refused_as_expired_before_asking_who_clicked(
    db: Database,
) -> None:
    # Issue 3's order: an expired token is unknown_or_expired first, whoever clicks it.
    clock = _Clock(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
    world = await quotes_world(db, clock=clock)
    run = await journeys.start(world.rt, "U_REP", ASK)
    token = run.pending_token or ""
    assert run.expires_at is not None
    clock.at = run.expires_at  # due, but the sweep has not run yet
    expired = outcomes.UnknownOrExpired(RefusalReason.expired)

    for actor in ("U_OTHER", "U_REP"):
        assert await decide.refusal(world.rt, token, actor) == expired
        assert await decide.decide(world.rt, token, "approve", actor) == expired
        assert await decide.decide(world.rt, token, "decline", actor) == expired

    same = await runs.get(db, run.id)
    assert same.state is RunState.suspended and same.lease_epoch == run.lease_epoch
    assert not await events.for_run(db, run.id, kind="decision")
    # Swept since: still expired, not a question of who clicked.
    clock.at = run.expires_at + timedelta(minutes=1)
    assert [r.id for r in await expire.expire_suspended(world.rt)] == [run.id]
    assert await decide.refusal(world.rt, token, "U_OTHER") == expired
    assert await decide.decide(world.rt, token, "approve", "U_OTHER") == expired
    assert await world.crm.sent_count() == 0
