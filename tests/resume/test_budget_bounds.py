"""The budget's other bounds: spend, time and tool calls each halt a run, and survive a pause.

test_budget.py covers the step bound. Here every other bound stops a run by
itself with ``budget:<bound>``, tells the requester, and leaves what was
consumed on the run; and a bound a run reached before it was suspended is
still reached when a person's approval resumes it (restored, never reset).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from examples import quotes
from resume import outcomes
from resume.apps import App
from resume.budget import Limits
from resume.messages import Message, ToolCall, ToolSpec
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from resume.tools import Scope, Tool, ToolContext
from store import events, ledger, outbox, runs
from store.engine import Database
from store.records import Run
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world

COST = 0.01


class WorkArgs(BaseModel):
    pause_s: float = 0.0


@dataclass(frozen=True)
class Bound:
    name: str
    limits: Limits
    #: How long each tool call takes (the time bound is reached by working, not waiting).
    pause_s: float
    #: The tool calls made before the bound stopped the run.
    executed: int


BOUNDS = [
    # Three model calls at $0.01 pass $0.025; the fourth step is refused.
    pytest.param(Bound("spend", Limits(max_steps=50, max_spend_usd=0.025, max_tool_calls=50),
                       0.0, 3), id="spend"),
    # Two tool calls allowed; the model's third is refused before it runs.
    pytest.param(Bound("tool_calls", Limits(max_steps=50, max_spend_usd=10.0, max_tool_calls=2),
                       0.0, 2), id="tool_calls"),
    # The first tool call alone takes longer than the whole time budget.
    pytest.param(Bound("time", Limits(max_steps=50, max_spend_usd=10.0, max_tool_calls=50,
                                      max_elapsed_ms=1000), 1.2, 1), id="time"),
]


def _working_app(limits: Limits, pause_s: float, executed: list[str]) -> App:
    """An agent that calls ``work`` on every turn, forever: only a bound stops it."""

    async def work(args: WorkArgs, ctx: ToolContext) -> dict[str, Any]:
        executed.append(ctx.idempotency_key)
        await asyncio.sleep(args.pause_s)
        return {"done": len(executed)}

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
        return Message.assistant(None, [ToolCall(name="work", arguments={"pause_s": pause_s})])

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    return App(name="working", scope=scope, limits=limits,
               model=ScriptedModel(script, cost_per_call_usd=COST),
               tools=[Tool(name="work", description="Work a while.", args=WorkArgs,
                           execute=work)])


async def _assert_halted(db: Database, run: Run, reason: str) -> None:
    assert run.state is RunState.halted and run.halt_reason == reason
    notices = [r.payload for r in await outbox.for_run(db, run.id) if r.kind == "run_notice"]
    assert [(n["event"], n["reason"]) for n in notices] == [("halted", reason)]
    assert [e.data["reason"] for e in await events.for_run(db, run.id, kind="halted")] == [
        reason]
    assert run.answer is None


@pytest.mark.parametrize("bound", BOUNDS)
async def test_budget__each_bound_halts_the_run_and_keeps_what_it_consumed(
    db: Database, bound: Bound,
) -> None:
    executed: list[str] = []
    rt = Runtime(db=db, app=_working_app(bound.limits, bound.pause_s, executed))

    returned = await journeys.start(rt, "U_REP", "work until something stops you")

    run = await runs.get(db, returned.id)
    await _assert_halted(db, run, f"budget:{bound.name}")
    assert len(executed) == bound.executed
    entries = await ledger.for_run(db, run.id)
    assert len(entries) == bound.executed
    # The consumed values are on the run row, as they were when it stopped.
    assert run.tool_calls == bound.executed
    steps = bound.executed + (1 if bound.name == "tool_calls" else 0)  # the refused call's step
    assert run.step == steps
    assert run.spend_usd == pytest.approx(steps * COST)
    assert run.limits == bound.limits.model_dump()
    if bound.name == "spend":
        assert run.spend_usd >= bound.limits.max_spend_usd
    if bound.name == "time":
        assert run.elapsed_ms >= bound.limits.max_elapsed_ms
    else:
        assert run.elapsed_ms < bound.limits.max_elapsed_ms


# --- Reached before a pause, still reached after it --------------------------------------

TIME_LIMIT_MS = 1000


@dataclass(frozen=True)
class Paused:
    name: str
    limits: Limits
    #: The send runs before the run halts: spend bounds model calls, not tools.
    sends: int


PAUSED = [
    # lookup, draft, send: three model calls at $0.01; the bound is passed by the third.
    pytest.param(Paused("spend", Limits(max_steps=50, max_spend_usd=0.025, max_tool_calls=50),
                        sends=1), id="spend"),
    # lookup and draft used both tool calls; the approved send would be the third.
    pytest.param(Paused("tool_calls", Limits(max_steps=50, max_spend_usd=10.0,
                                             max_tool_calls=2), sends=0), id="tool_calls"),
    # The model thinks about the send for longer than the run's whole time budget.
    pytest.param(Paused("time", Limits(max_steps=50, max_spend_usd=10.0, max_tool_calls=50,
                                       max_elapsed_ms=TIME_LIMIT_MS), sends=0), id="time"),
]


def _slow_to_send(
    messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> Turn | Awaitable[Turn]:
    reply = quotes.quote_script(messages, tools)
    if not (reply.tool_calls and reply.tool_calls[0].name == "send_quote"):
        return reply

    async def later() -> Turn:
        await asyncio.sleep(TIME_LIMIT_MS / 1000 + 0.2)
        return reply

    return later()


@pytest.mark.parametrize("paused", PAUSED)
async def test_budget__a_bound_reached_before_the_pause_still_holds_after_approval(
    db: Database, paused: Paused,
) -> None:
    model = ScriptedModel(_slow_to_send if paused.name == "time" else quotes.quote_script,
                          cost_per_call_usd=COST)
    world = await quotes_world(db, model=model, limits=paused.limits)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended, run.halt_reason
    suspended = await runs.get(db, run.id)
    assert (suspended.step, suspended.tool_calls) == (3, 2)

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")

    final = await runs.get(db, run.id)
    await _assert_halted(db, final, f"budget:{paused.name}")
    assert await world.crm.sent_count() == paused.sends
    if paused.sends:
        assert isinstance(result, outcomes.Executed)
    else:
        assert isinstance(result, outcomes.Stopped)
        assert [e.tool for e in await ledger.for_run(db, run.id)] == [
            "lookup_account", "draft_quote"]
    # Consumption went on from where the pause left it.
    assert final.step == suspended.step
    assert final.tool_calls == suspended.tool_calls + paused.sends
    assert final.spend_usd == pytest.approx(suspended.spend_usd)
    assert final.elapsed_ms >= suspended.elapsed_ms
    if paused.name == "time":
        assert suspended.elapsed_ms >= TIME_LIMIT_MS
