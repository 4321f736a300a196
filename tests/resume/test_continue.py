"""A person's continue of a halted run (a deliberate grant) and cancel of their own run."""

from __future__ import annotations

import asyncio

from resume import cancel, outcomes
from resume.budget import Limits
from store import events, ledger, outbox, runs
from store.engine import Database
from store.reasons import RefusalReason
from store.records import Run
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, QuotesWorld, quotes_world

TIGHT = Limits(max_steps=2, max_spend_usd=0.5, max_tool_calls=8)


async def _halted(db: Database) -> tuple[QuotesWorld, Run]:
    """The reference run halted on its step bound: looked up, drafted, not yet sent."""
    world = await quotes_world(db, limits=TIGHT)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.halted and run.halt_reason == "budget:steps"
    assert run.step == 2 and run.tool_calls == 2
    return world, run


async def test_continue_run__someone_elses_or_a_missing_run_is_not_found(db: Database) -> None:
    world, run = await _halted(db)

    assert await journeys.continue_run(world.rt, run.id, "U_OTHER") == (
        outcomes.ContinueRefused(RefusalReason.not_found))
    assert await journeys.continue_run(world.rt, "run_missing", "U_REP") == (
        outcomes.ContinueRefused(RefusalReason.not_found))

    same = await runs.get(db, run.id)
    assert same.state is RunState.halted and same.event_seq == run.event_seq
    assert same.limits == run.limits


async def test_continue_run__grants_more_steps_and_continues_the_budget(db: Database) -> None:
    world, run = await _halted(db)

    result = await journeys.continue_run(world.rt, run.id, "U_REP")

    assert isinstance(result, outcomes.Continued)
    assert result.previous_reason == "budget:steps"
    assert result.old_limits["max_steps"] == 2 and result.new_limits["max_steps"] == 6
    after = result.run
    assert after.state is RunState.suspended  # drafted already; now asks to send
    assert after.limits["max_steps"] == 6
    assert after.limits["max_spend_usd"] == TIGHT.max_spend_usd * 1.5
    # Consumption carried on from where it was: one more step, nothing reset.
    assert after.step == run.step + 1 and after.tool_calls == run.tool_calls
    assert after.spend_usd > run.spend_usd and after.elapsed_ms >= run.elapsed_ms
    # The tools that ran before the halt were not called again.
    assert [e.tool for e in await ledger.for_run(db, run.id)] == [
        "lookup_account", "draft_quote"]
    [grant] = await events.for_run(db, run.id, kind="grant")
    assert grant.data["by"] == "U_REP" and grant.data["previous_reason"] == "budget:steps"
    assert grant.data["old_limits"] == run.limits
    assert grant.data["new_limits"] == after.limits
    notices = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "run_notice"]
    assert [n["event"] for n in notices] == ["halted", "continued"]
    assert notices[1]["grant"]["new_limits"]["max_steps"] == 6
    # Once it runs again, a second continue is refused, and the run finishes normally.
    assert await journeys.continue_run(world.rt, run.id, "U_REP") == (
        outcomes.ContinueRefused(RefusalReason.not_halted))
    done = await journeys.resume_after_confirmation(world.rt, after.pending_token or "",
                                                        "approve", "U_REP")
    assert isinstance(done, outcomes.Executed)
    assert (await runs.get(db, run.id)).state is RunState.answered
    assert await world.crm.sent_count("Henderson") == 1


async def test_continue_run__a_suspended_run_is_not_halted(db: Database) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)

    refused = await journeys.continue_run(world.rt, run.id, "U_REP")

    assert refused == outcomes.ContinueRefused(RefusalReason.not_halted)
    same = await runs.get(db, run.id)
    assert same.state is RunState.suspended and same.limits == run.limits
    assert await events.for_run(db, run.id, kind="grant") == []


async def test_continue_run__two_at_once_grant_once(db: Database) -> None:
    world, run = await _halted(db)

    results = await asyncio.gather(*(journeys.continue_run(world.rt, run.id, "U_REP")
                                     for _ in range(2)))

    assert sum(isinstance(r, outcomes.Continued) for r in results) == 1
    assert outcomes.ContinueRefused(RefusalReason.not_halted) in results
    assert len(await events.for_run(db, run.id, kind="grant")) == 1
    assert (await runs.get(db, run.id)).limits["max_steps"] == 6


async def test_cancel__suspended_run_fails_cancelled_and_its_card_is_stripped(
    db: Database,
) -> None:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    token = run.pending_token or ""

    assert await cancel.cancel(world.rt, run.id, "U_OTHER") == (
        outcomes.CancelRefused(RefusalReason.not_found))
    result = await cancel.cancel(world.rt, run.id, "U_REP")

    assert isinstance(result, outcomes.Cancelled)
    after = await runs.get(db, run.id)
    assert after.state is RunState.failed and after.halt_reason == "cancelled"
    rows = await outbox.for_run(db, run.id)
    assert [r.kind for r in rows] == ["approval_card", "card_update", "run_notice"]
    assert rows[1].payload["token"] == token and rows[1].payload["status"] == "cancelled"
    assert rows[1].payload["actor"] == "U_REP"
    assert rows[2].payload["event"] == "cancelled"
    [event] = await events.for_run(db, run.id, kind="cancelled")
    assert event.data["by"] == "U_REP" and event.data["previous_state"] == "suspended"
    # The card's token no longer works; nothing was sent; cancelling again is refused.
    clicked = await journeys.resume_after_confirmation(world.rt, token, "approve", "U_REP")
    assert isinstance(clicked, outcomes.UnknownOrExpired)
    assert (await runs.get(db, run.id)).state is RunState.failed
    assert await world.crm.sent_count() == 0
    assert await cancel.cancel(world.rt, run.id, "U_REP") == (
        outcomes.CancelRefused(RefusalReason.not_cancellable))


async def test_cancel__halted_run_fails_cancelled_without_a_card_update(db: Database) -> None:
    world, run = await _halted(db)

    result = await cancel.cancel(world.rt, run.id, "U_REP")

    assert isinstance(result, outcomes.Cancelled)
    assert result.run.state is RunState.failed and result.run.halt_reason == "cancelled"
    kinds = [r.kind for r in await outbox.for_run(db, run.id)]
    assert kinds == ["run_notice", "run_notice"]  # halted, then cancelled
    assert await journeys.continue_run(world.rt, run.id, "U_REP") == (
        outcomes.ContinueRefused(RefusalReason.not_halted))
