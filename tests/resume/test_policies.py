"""Who may decide, which calls need a person, and what the record of a decision says.

A tool's approvers are the requester (default), a fixed list of user ids, or a
predicate on (actor, requester). A refused click changes nothing; an allowed
one claims the run. ``confirm`` may be a predicate on the call's arguments: a
call it does not flag runs at once, without a card. The ``decision`` event
names the clicker and the digest of the preview they were shown, and that
digest is sha256 over the preview's canonical JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from bot import cards
from bot.cards import replies
from resume import decide, outcomes, proceed
from resume.apps import App
from resume.messages import Message, ToolCall
from resume.outbox import ApprovalCard
from resume.outcomes import Decision
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from resume.tools import Approvers, Decider, Preview, Scope, Tool, ToolContext
from store import claims, events, ledger, outbox, runs
from store.engine import Database
from store.records import Approval, Run
from store.states import LedgerStatus, RunState
from tests import journeys

REQUESTER = "UREQUESTER"
MANAGERS = ("UMGR1", "UMGR2")


class AmountArgs(BaseModel):
    amount: int


def four_eyes(decider: Decider) -> bool:
    """Someone in finance, and never the requester themselves."""
    return decider.user_id != decider.requester and decider.user_id.startswith("UFIN")


def _app(turns: Sequence[Turn], executed: list[tuple[str, int]]) -> App:
    def tool(name: str, **policy: Any) -> Tool[AmountArgs]:
        async def execute(args: AmountArgs, ctx: ToolContext) -> dict[str, Any]:
            executed.append((name, args.amount))
            return {name: args.amount, "confirmed": ctx.confirmed}

        return Tool(name=name, description=f"{name} an amount.", args=AmountArgs,
                    execute=execute, **policy)

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    return App(name="policies", scope=scope, model=ScriptedModel.turns(turns), tools=[
        tool("refund", confirm=True, approvers=Approvers(users=MANAGERS)),
        tool("wire", confirm=True, approvers=Approvers(
            predicate=four_eyes, description="someone in finance other than the requester")),
        tool("pay", confirm=lambda args, scope: args.amount > 100),
    ])


def _calls(*calls: tuple[str, int]) -> Message:
    return Message.assistant(None, [ToolCall(name=name, arguments={"amount": amount})
                                    for name, amount in calls])


async def _started(
    db: Database, turns: Sequence[Turn], requester: str = REQUESTER,
) -> tuple[Runtime, Run, list[tuple[str, int]]]:
    executed: list[tuple[str, int]] = []
    rt = Runtime(db=db, app=_app(turns, executed))
    run = await journeys.start(rt, requester, "move some money")
    assert run.state is RunState.suspended, run.halt_reason
    return rt, run, executed


async def _approval(db: Database, run: Run) -> Approval:
    [mine] = [a for a in await claims.approvals_of(db, run.id) if a.token == run.pending_token]
    return mine


async def _assert_untouched(db: Database, run: Run, executed: list[tuple[str, int]]) -> None:
    """A refused click changed nothing: same suspension, same lease, no decision."""
    same = await runs.get(db, run.id)
    assert same.state is RunState.suspended and same.pending_token == run.pending_token
    assert same.lease_epoch == run.lease_epoch and same.event_seq == run.event_seq
    assert (await _approval(db, run)).decided_by is None
    assert await events.for_run(db, run.id, kind="decision") == []
    assert executed == []


async def test_approvers__fixed_users_decide_and_the_requester_does_not(db: Database) -> None:
    rt, run, executed = await _started(db, [_calls(("refund", 30)), "refunded 30"])
    token = run.pending_token or ""
    [card] = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert card["approvers"] == list(MANAGERS)

    clicks: list[tuple[str, Decision]] = [(REQUESTER, "approve"), ("USTRANGER", "approve"),
                                          (REQUESTER, "decline")]
    for actor, decision in clicks:
        refused = await decide.decide(rt, token, decision, actor)
        assert refused == outcomes.NotAnApprover(actor, REQUESTER, list(MANAGERS))
    await _assert_untouched(db, run, executed)

    claimed = await decide.decide(rt, token, "approve", "UMGR2")

    assert isinstance(claimed, outcomes.Claimed)
    assert claimed.run.state is RunState.running
    result = await proceed.proceed(claimed)
    assert isinstance(result, outcomes.Executed)
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered and final.answer == "refunded 30"
    assert executed == [("refund", 30)]
    assert (await _approval(db, run)).decided_by == "UMGR2"


async def test_approvers__a_predicate_decides_who_may_approve(db: Database) -> None:
    rt, run, executed = await _started(db, [_calls(("wire", 900)), "wired 900"],
                                       requester="UFIN1")
    token = run.pending_token or ""

    # The requester is in finance but may not approve their own wire; sales may not at all.
    for actor in ("UFIN1", "USALES"):
        refused = await decide.decide(rt, token, "approve", actor)
        assert isinstance(refused, outcomes.NotAnApprover)
        assert (refused.actor, refused.requester) == (actor, "UFIN1")
    await _assert_untouched(db, run, executed)

    result = await journeys.resume_after_confirmation(rt, token, "approve", "UFIN2")

    assert isinstance(result, outcomes.Executed)
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered and final.answer == "wired 900"
    assert executed == [("wire", 900)]
    [decision] = await events.for_run(db, run.id, kind="decision")
    assert decision.data["by"] == "UFIN2"


async def test_approvers__a_predicate_policy_is_described_not_mistaken_for_the_requester(
    db: Database,
) -> None:
    rt, run, _ = await _started(db, [_calls(("wire", 900)), "wired 900"], requester="UFIN1")

    refused = await decide.decide(rt, run.pending_token or "", "approve", "UFIN1")

    assert isinstance(refused, outcomes.NotAnApprover)
    said = replies.refusal(refused)
    assert "only <@UFIN1> can" not in said
    assert "only someone in finance other than the requester can" in said
    [card] = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert card["approvers"] is None
    assert card["approvers_policy"] == "someone in finance other than the requester"
    rendered = json.dumps(cards.approval_card(ApprovalCard.model_validate(card)))
    assert "Approvers: someone in finance other than the requester" in rendered


async def test_confirm__a_predicate_asks_for_some_calls_and_runs_the_others_at_once(
    db: Database,
) -> None:
    turns: list[Turn] = [_calls(("pay", 50)), _calls(("pay", 500)), "paid 50 and 500"]
    rt, run, executed = await _started(db, turns)

    # The small payment ran without anyone being asked; the large one waits for a person.
    assert executed == [("pay", 50)]
    entries = await ledger.for_run(db, run.id)
    assert [(e.tool, e.args, e.status) for e in entries] == [
        ("pay", {"amount": 50}, LedgerStatus.succeeded)]
    small = entries[0]
    [asked] = await claims.approvals_of(db, run.id)
    assert asked.token == run.pending_token and asked.call_id != small.call_id
    assert run.pending is not None and run.pending["args"] == {"amount": 500}
    cards = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert len(cards) == 1 and cards[0]["preview"]["fields"] == [["amount", "500"]]

    result = await journeys.resume_after_confirmation(
        rt, run.pending_token or "", "approve", REQUESTER)

    assert isinstance(result, outcomes.Executed)
    assert result.result == {"pay": 500, "confirmed": True}
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered and final.answer == "paid 50 and 500"
    assert executed == [("pay", 50), ("pay", 500)]
    tools = await events.for_run(db, run.id, kind="tool")
    assert [(e.data["call_id"], e.data["confirmed"]) for e in tools] == [
        (small.call_id, False), (asked.call_id, True)]
    assert len(await claims.approvals_of(db, run.id)) == 1
    large = [e for e in await ledger.for_run(db, run.id) if e.call_id == asked.call_id]
    assert [e.status for e in large] == [LedgerStatus.succeeded]


async def test_approvers__two_approvers_clicking_at_once_one_decides(db: Database) -> None:
    winners: set[str] = set()
    for i in range(6):
        rt, run, executed = await _started(db, [_calls(("refund", 30 + i)), "settled"])
        token = run.pending_token or ""
        clicks: list[tuple[str, Decision]] = [("UMGR1", "approve"), ("UMGR2", "decline")]
        if i % 2:
            clicks.reverse()

        results = await asyncio.gather(*(
            decide.decide(rt, token, decision, actor,
                                "not this one" if decision == "decline" else None)
            for actor, decision in clicks))

        [claimed] = [r for r in results if isinstance(r, outcomes.Claimed)]
        [lost] = [r for r in results if not isinstance(r, outcomes.Claimed)]
        decided = await _approval(db, run)
        assert decided.decided_by in MANAGERS and decided.decided_at is not None
        assert claimed.decision == decided.decision
        assert lost == outcomes.AlreadyResumed(decided.decision or "", decided.decided_by,
                                               decided.decided_at)
        winners.add(decided.decided_by)
        [decision] = await events.for_run(db, run.id, kind="decision")
        assert decision.data["by"] == decided.decided_by
        updates = [r.payload for r in await outbox.for_run(db, run.id)
                   if r.kind == "card_update"]
        assert [(u["status"], u["actor"]) for u in updates] == [
            ("approved" if decided.decision == "approve" else "declined", decided.decided_by)]

        outcome = await proceed.proceed(claimed)

        if decided.decision == "approve":
            assert isinstance(outcome, outcomes.Executed)
            assert executed == [("refund", 30 + i)]
        else:
            assert isinstance(outcome, outcomes.Declined)
            assert outcome.reason == "not this one" and executed == []
        assert (await runs.get(db, run.id)).state is RunState.answered
    assert winners <= set(MANAGERS)


# --- The record of a decision ------------------------------------------------------------

#: Preview's documented canonical form: json.dumps(model_dump(mode="json"), sort_keys=True,
#: separators=(",", ":"), ensure_ascii=False), hashed as UTF-8.
CANONICAL = ('{"body":null,"fields":[["Amount","€30.00"],["Account","Müller GmbH"]],'
             '"title":"Refund €30.00 to Müller GmbH"}')
PINNED_DIGEST = "1bd73c154541870b03124f0fcc00b9f269c19a234e20ac83361f5b369fafae02"


def _canonical(preview: dict[str, Any]) -> str:
    return json.dumps(preview, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_preview_digest__is_sha256_of_the_canonical_json() -> None:
    preview = Preview(title="Refund €30.00 to Müller GmbH",
                      fields=[("Amount", "€30.00"), ("Account", "Müller GmbH")])

    assert preview.canonical() == CANONICAL
    assert preview.digest() == hashlib.sha256(CANONICAL.encode("utf-8")).hexdigest()
    assert preview.digest() == PINNED_DIGEST
    # Field order is part of what the approver saw: reordered fields, another digest.
    swapped = preview.model_copy(update={"fields": list(reversed(preview.fields))})
    assert swapped.digest() != preview.digest()


@pytest.mark.parametrize(("decision", "reason"), [("approve", None), ("decline", "wrong amount")])
async def test_decision__records_the_clicker_and_the_digest_they_were_shown(
    db: Database, decision: Decision, reason: str | None,
) -> None:
    rt, run, _ = await _started(db, [_calls(("refund", 30)), "done"])
    asked = await _approval(db, run)
    # What the card showed (the default preview of the call's arguments), and its digest.
    [card] = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    shown = {"title": "Run refund", "fields": [["amount", "30"]], "body": None}
    assert card["preview"] == shown
    digest = hashlib.sha256(_canonical(shown).encode("utf-8")).hexdigest()
    assert asked.digest == digest == run.pending_preview_digest
    [suspended] = await events.for_run(db, run.id, kind="suspended")
    assert suspended.data["digest"] == digest

    result = await journeys.resume_after_confirmation(
        rt, run.pending_token or "", decision, "UMGR1", reason)

    assert isinstance(result, outcomes.Executed if decision == "approve" else outcomes.Declined)
    [recorded] = await events.for_run(db, run.id, kind="decision")
    assert recorded.data == {"decision": decision, "by": "UMGR1", "call_id": asked.call_id,
                             "digest": digest, "reason": reason}
    decided = await _approval(db, run)
    assert (decided.decision, decided.decided_by, decided.reason) == (decision, "UMGR1", reason)


async def _one_tool(db: Database, approvers: Approvers, requester: str = REQUESTER
                    ) -> tuple[Runtime, Run, list[tuple[str, int]]]:
    """A run waiting on one ``refund`` approved under ``approvers``."""
    executed: list[tuple[str, int]] = []
    app = _app([_calls(("refund", 30)), "refunded 30"], executed)
    tools = [dataclasses.replace(t, approvers=approvers) if t.name == "refund" else t
             for t in app.tools]
    rt = Runtime(db=db, app=dataclasses.replace(app, tools=tools))
    run = await journeys.start(rt, requester, "refund 30")
    assert run.state is RunState.suspended, run.halt_reason
    return rt, run, executed


async def test_approvers__a_listed_requester_decides_only_when_the_tool_allows_it(
    db: Database,
) -> None:
    listed = (REQUESTER, "UMGR1")
    rt, run, executed = await _one_tool(db, Approvers(users=listed))
    assert isinstance(await decide.decide(rt, run.pending_token or "", "approve", REQUESTER),
                      outcomes.Claimed)

    rt, run, executed = await _one_tool(db, Approvers(users=listed, allow_requester=False))
    token = run.pending_token or ""
    [card] = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "approval_card"]
    assert card["approvers"] == ["UMGR1"]  # the card does not offer the requester
    for decision in ("approve", "decline"):
        refused = await decide.decide(rt, token, decision, REQUESTER)
        assert isinstance(refused, outcomes.NotAnApprover)
    await _assert_untouched(db, run, executed)
    result = await journeys.resume_after_confirmation(rt, token, "approve", "UMGR1")
    assert isinstance(result, outcomes.Executed) and executed == [("refund", 30)]


async def test_approvers__a_predicate_sees_the_clickers_team(db: Database) -> None:
    seen: list[Decider] = []

    def members_only(decider: Decider) -> bool:
        seen.append(decider)
        return decider.team_id == "T0HOME"

    rt, run, executed = await _one_tool(
        db, Approvers(predicate=members_only, description="a member of this workspace",
                      allow_requester=False))
    token = run.pending_token or ""
    guest = await decide.decide(rt, token, "approve", "UGUEST", team_id="T0PARTNER")
    assert isinstance(guest, outcomes.NotAnApprover)
    assert await decide.refusal(rt, token, "UGUEST", team_id="T0PARTNER") == guest
    assert isinstance(await decide.decide(rt, token, "approve", REQUESTER, team_id="T0HOME"),
                      outcomes.NotAnApprover)  # a member, but the requester
    await _assert_untouched(db, run, executed)

    result = await journeys.resume_after_confirmation(rt, token, "approve", "UMEMBER")
    assert isinstance(result, outcomes.NotAnApprover)  # no team known: not a member
    claimed = await decide.decide(rt, token, "approve", "UMEMBER", team_id="T0HOME")
    assert isinstance(claimed, outcomes.Claimed)
    assert isinstance(await proceed.proceed(claimed), outcomes.Executed)
    assert executed == [("refund", 30)]
    assert Decider("UMEMBER", REQUESTER, "T0HOME") in seen
    assert Decider("UGUEST", REQUESTER, "T0PARTNER") in seen


def test_approvers__refusing_the_requester_with_nobody_else_is_an_error() -> None:
    with pytest.raises(ValueError, match="nobody may approve"):
        Approvers(allow_requester=False)


@pytest.mark.parametrize("examples", [[""], ["   "], ["fine", "\n"]])
def test_app__a_blank_example_question_is_refused(examples: list[str]) -> None:
    tools = _app([], []).tools
    with pytest.raises(ValueError, match="non-blank question"):
        App(name="x", tools=tools, scope=_app([], []).scope, model=ScriptedModel.turns([]),
            examples=examples)
