"""Deploy safety: a run suspended under one tool definition, resumed under another."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from examples import quotes
from examples.crm import CRM, Pricing
from resume import decide, expire, outcomes, reap
from resume.apps import App
from resume.runtime import Runtime
from resume.tools import Tool, ToolContext
from store import events, ledger, outbox, runs
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.quotes_harness import ASK, QuotesWorld, quotes_world


class SendRequiresNote(BaseModel):
    quote_id: str
    note: str


class SendWithOptionalNote(BaseModel):
    quote_id: str
    note: str | None = None


def _with_send_args(app: App, args: type[BaseModel]) -> App:
    tools = [dataclasses.replace(t, args=args) if t.name == "send_quote" else t
             for t in app.tools]
    return dataclasses.replace(app, tools=tools)


def _with_new_tool(app: App) -> App:
    class PingArgs(BaseModel):
        pass

    async def ping(args: PingArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"pong": True}

    tool = Tool(name="ping", description="Check the CRM answers.", args=PingArgs, execute=ping)
    return dataclasses.replace(app, tools=[*app.tools, tool])


def _without_send(app: App) -> App:
    return dataclasses.replace(app, tools=[t for t in app.tools if t.name != "send_quote"],
                               contract=[])


async def _suspended_then_deployed(db: Database, change: Any) -> tuple[QuotesWorld, Runtime, str]:
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended
    deployed = Runtime(db=db, app=change(quotes.build(world.crm)))
    assert deployed.app.fingerprint() != run.app_fingerprint
    return world, deployed, run.pending_token or ""


async def test_deploy__an_argument_became_required_fails_snapshot_incompatible(
    db: Database,
) -> None:
    world, deployed, token = await _suspended_then_deployed(
        db, lambda app: _with_send_args(app, SendRequiresNote))

    result = await journeys.resume_after_confirmation(deployed, token, "approve", "U_REP")

    assert isinstance(result, outcomes.Stopped)
    run = result.run
    assert run.state is RunState.failed and run.halt_reason == "snapshot_incompatible"
    assert await world.crm.sent_count() == 0
    notice = (await outbox.for_run(db, run.id))[-1]
    assert notice.kind == "run_notice" and notice.payload["event"] == "failed"
    assert notice.payload["reason"] == "snapshot_incompatible"
    assert "send_quote" in notice.payload["detail"] and "note" in notice.payload["detail"]
    assert await events.for_run(db, run.id, kind="app_changed") == []


async def test_deploy__the_pending_tool_vanished_fails_snapshot_incompatible(
    db: Database,
) -> None:
    world, deployed, token = await _suspended_then_deployed(db, _without_send)

    result = await journeys.resume_after_confirmation(deployed, token, "approve", "U_REP")

    assert isinstance(result, outcomes.Stopped)
    assert result.run.halt_reason == "snapshot_incompatible"
    notice = (await outbox.for_run(db, result.run.id))[-1].payload
    assert "send_quote" in notice["detail"] and "no longer exists" in notice["detail"]
    assert await world.crm.sent_count() == 0


async def test_deploy__a_new_optional_argument_proceeds_and_records_the_change(
    db: Database,
) -> None:
    world, deployed, token = await _suspended_then_deployed(
        db, lambda app: _with_send_args(app, SendWithOptionalNote))
    before = (await runs.list_runs(db))[0]

    result = await journeys.resume_after_confirmation(deployed, token, "approve", "U_REP")

    assert isinstance(result, outcomes.Executed)
    after = await runs.get(db, before.id)
    assert after.state is RunState.answered
    assert after.app_fingerprint == deployed.app.fingerprint()
    [changed] = await events.for_run(db, before.id, kind="app_changed")
    assert changed.data == {"from": before.app_fingerprint, "to": deployed.app.fingerprint()}
    assert await world.crm.sent_count("Henderson") == 1


async def test_deploy__a_new_tool_proceeds_on_recovery_and_records_the_change(
    db: Database,
) -> None:
    world = await quotes_world(db)
    orphan = await journeys.begin(world.rt, "U_REP", ASK)  # crashed before its first step
    stale = datetime.now(UTC) - timedelta(hours=1)
    assert await runs.heartbeat(db, orphan.id, orphan.lease_epoch, now=stale)
    deployed = Runtime(db=db, app=_with_new_tool(quotes.build(world.crm)))

    report = await reap.recover_orphans(deployed)

    [run] = report.recovered
    assert run.state is RunState.suspended and run.app_fingerprint == deployed.app.fingerprint()
    [changed] = await events.for_run(db, run.id, kind="app_changed")
    assert changed.data["from"] == orphan.app_fingerprint


async def test_deploy__expired_run_continued_under_incompatible_tool_fails_loudly(
    db: Database,
) -> None:

    world, deployed, _token = await _suspended_then_deployed(
        db, lambda app: _with_send_args(app, SendRequiresNote))
    [run] = await runs.list_runs(db, states=[RunState.suspended])
    assert run.expires_at is not None
    await expire.expire_suspended(world.rt, now=run.expires_at + timedelta(seconds=1))

    result = await journeys.continue_run(deployed, run.id, "U_REP")

    assert isinstance(result, outcomes.Continued)
    after = await runs.get(db, run.id)
    assert after.state is RunState.failed and after.halt_reason == "snapshot_incompatible"
    assert await world.crm.sent_count() == 0


async def test_deploy__recovered_after_the_approved_send_ran_is_not_held_to_its_old_args(
    db: Database,
) -> None:
    """The pending call already has its result: a later arg change does not concern it."""
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    claimed = await decide.decide(world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(claimed, outcomes.Claimed)
    # Run the approved send, then "crash" before the final model step commits.
    from resume import calls
    from resume.drive import outstanding
    from resume.held import HeldRun
    from resume.messages import Message
    from store import runs

    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    worker = HeldRun(world.rt, claimed.run, convo, scope=await world.rt.app.scope("U_REP"))
    [call] = outstanding(convo)
    assert await calls.handle(worker, call, None) is None
    assert await world.crm.sent_count() == 1
    stale = datetime.now(UTC) - timedelta(minutes=10)
    async with db.write() as conn:
        await conn.execute(runs.RUNS.update().where(runs.RUNS.c.id == run.id)
                           .values(heartbeat_at=stale))

    deployed = Runtime(db=db, app=_with_send_args(quotes.build(world.crm), SendRequiresNote))
    await reap.recover_orphans(deployed)

    after = await runs.get(db, run.id)
    assert after.state is RunState.answered, after.halt_reason
    assert await world.crm.sent_count() == 1
    assert await events.for_run(db, run.id, kind="app_changed")


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


class SendThenCrashCRM(CRM):
    """The quote is sent, then the process dies before signoff records it."""

    async def send(self, quote_id: str, pricing: Pricing, key: str) -> dict[str, Any]:
        await super().send(quote_id, pricing, key)
        raise Crash


async def test_deploy__incompatible_after_a_crash_mid_send_names_the_unknown_send(
    db: Database,
) -> None:
    crm = SendThenCrashCRM(db)
    await crm.setup()
    rt = Runtime(db=db, app=quotes.build(crm))
    run = await journeys.start(rt, "U_REP", ASK)
    with pytest.raises(Crash):
        await journeys.resume_after_confirmation(rt, run.pending_token or "", "approve",
                                                     "U_REP")
    [send] = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert send.status is LedgerStatus.started and await crm.sent_count() == 1
    stale = datetime.now(UTC) - timedelta(hours=1)
    assert await runs.heartbeat(db, run.id, run.lease_epoch + 1, now=stale)
    deployed = Runtime(db=db, app=_with_send_args(quotes.build(crm), SendRequiresNote))

    await reap.recover_orphans(deployed)

    after = await runs.get(db, run.id)
    assert after.state is RunState.failed and after.halt_reason == "snapshot_incompatible"
    [send] = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert send.status is LedgerStatus.unknown
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["reason"] == "snapshot_incompatible" and "note" in notice["detail"]
    assert "send_quote may or may not have run" in notice["detail"]
    assert send.args["quote_id"] in notice["detail"] and send.idempotency_key in notice["detail"]
    [failed] = await events.for_run(db, run.id, kind="failed")
    assert [c["call_id"] for c in failed.data["unknown_calls"]] == [send.call_id]
    assert await crm.sent_count() == 1
