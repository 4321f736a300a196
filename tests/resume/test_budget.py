"""Budget across pauses: suspension is no way around it, recovery restores it, never resets it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from examples import quotes
from resume import outcomes, reap
from resume.budget import Limits
from resume.messages import Message, ToolCall, ToolSpec
from resume.scripted import ScriptedModel, Turn
from store import ledger, runs
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world


def _last_tool(messages: Sequence[Message]) -> tuple[str | None, dict[str, object]]:
    for m in reversed(messages):
        if m.role == "tool":
            return m.name, json.loads(m.content or "{}")
    return None, {}


def keeps_asking(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
    """Look up once, then draft and ask to send, forever: every send gets a new draft."""
    last, data = _last_tool(messages)
    if last is None:
        return Message.assistant(None, [ToolCall(name="lookup_account",
                                                 arguments={"account": "Henderson"})])
    if last == "draft_quote":
        return Message.assistant(None, [ToolCall(name="send_quote",
                                                 arguments={"quote_id": data["quote_id"]})])
    return Message.assistant(None, [ToolCall(name="draft_quote", arguments={
        "account": "Henderson", "sku": "SKU-4411", "quantity": 10})])


async def test_budget__approving_every_request_still_halts_at_the_step_bound(
    db: Database,
) -> None:
    limits = Limits(max_steps=7, max_spend_usd=10.0, max_tool_calls=100)
    world = await quotes_world(db, model=ScriptedModel(keeps_asking), limits=limits)
    run = await journeys.start(world.rt, "U_REP", ASK)
    approvals = 0
    for _ in range(20):  # far more than the bound allows; the run must stop by itself
        if run.state is not RunState.suspended:
            break
        result = await journeys.resume_after_confirmation(
            world.rt, run.pending_token or "", "approve", "U_REP")
        assert isinstance(result, outcomes.Executed)
        approvals += 1
        run = await runs.get(db, run.id)

    assert run.state is RunState.halted and run.halt_reason == "budget:steps"
    assert run.step == limits.max_steps
    # steps: lookup, then (draft, send) three times; each send was approved and ran once
    assert approvals == 3 and await world.crm.sent_count() == 3
    sends = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert len(sends) == 3


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


async def test_budget__recovery_restores_what_was_spent(db: Database) -> None:
    crash = [True]

    def crashes_once_after_drafting(messages: Sequence[Message],
                                    tools: Sequence[ToolSpec]) -> Turn:
        if _last_tool(messages)[0] == "draft_quote" and crash:
            crash.pop()
            raise Crash
        return quotes.quote_script(messages, tools)

    model = ScriptedModel(crashes_once_after_drafting, cost_per_call_usd=0.01)
    world = await quotes_world(db, model=model)
    with pytest.raises(Crash):
        await journeys.start(world.rt, "U_REP", ASK)
    before = (await runs.list_runs(db))[0]
    assert before.state is RunState.running
    assert (before.step, before.tool_calls) == (2, 2)
    stale = datetime.now(UTC) - timedelta(hours=1)
    assert await runs.heartbeat(db, before.id, before.lease_epoch, now=stale)

    await reap.recover_orphans(world.rt)

    after = await runs.get(db, before.id)
    assert after.state is RunState.suspended
    assert after.step == before.step + 1 and after.tool_calls == before.tool_calls
    assert after.spend_usd == pytest.approx(before.spend_usd + 0.01)
    assert after.elapsed_ms >= before.elapsed_ms
    assert after.limits == before.limits
