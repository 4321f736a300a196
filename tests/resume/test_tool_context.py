"""What a tool sees: its context carries the run, as stored when the call was made."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from examples import quotes
from resume import outcomes
from resume.tools import Guard, Scope, ToolContext
from store import runs
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world


async def test_tool_context__carries_the_run_at_call_time(db: Database) -> None:
    world = await quotes_world(db)
    seen: list[tuple[str, ToolContext]] = []
    app = world.rt.app

    def spying(name: str, execute: Any) -> Any:
        async def run(args: Any, ctx: ToolContext) -> Any:
            seen.append((name, ctx))
            return await execute(args, ctx)
        return run

    async def guard(args: quotes.SendArgs, scope: Scope, ctx: ToolContext) -> Guard:
        seen.append(("guard", ctx))
        return Guard.passed()

    tools = [dataclasses.replace(t, execute=spying(t.name, t.execute),
                                 guard=guard if t.guard else None) for t in app.tools]
    world.rt.app = dataclasses.replace(app, tools=tools)
    run = await journeys.start(world.rt, "U_REP", ASK)
    result = await journeys.resume_after_confirmation(world.rt, run.pending_token or "",
                                                          "approve", "U_REP")
    assert isinstance(result, outcomes.Executed)

    # The guard checks the call before the card is posted, and again after the approval.
    assert [name for name, _ in seen] == ["lookup_account", "draft_quote", "guard", "guard",
                                          "send_quote"]
    assert [ctx.confirmed for name, ctx in seen if name == "guard"] == [False, True]
    for name, ctx in seen:
        assert ctx.run.id == ctx.run_id == run.id, name
        assert ctx.run.user_id == ctx.user_id == "U_REP" and ctx.run.question == ASK
        assert ctx.run.state is RunState.running
    lookup, draft, _asked, _approved, send = (ctx.run for _, ctx in seen)
    # A snapshot at call time: the step the model just took, the calls made before this one.
    assert (lookup.step, lookup.tool_calls) == (1, 0)
    assert (draft.step, draft.tool_calls) == (2, 1)
    assert send.lease_epoch == run.lease_epoch + 1 and send.pending == run.pending
    # Read-only: a tool cannot change the run through its context.
    with pytest.raises(dataclasses.FrozenInstanceError):
        send.state = RunState.answered  # type: ignore[misc]
    assert (await runs.get(db, run.id)).state is RunState.answered
