"""Orphan recovery in one process: zombies, racing reapers, the stale boundary, never replay.

Real-process crashes are in test_crash.py. Here a "crash" is a run nobody
works on any more (created and never driven, or a drive stopped by an
exception no handler catches); time moves by writing the heartbeat.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from examples import crm as crm_tables
from examples import quotes
from examples.crm import CRM, Pricing
from resume import reap
from resume.apps import App
from resume.messages import Message, ToolCall, ToolSpec
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from resume.tools import Scope, Tool, ToolContext
from store import claims, events, ledger, outbox, runs
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.quotes_harness import ASK

STALE = timedelta(hours=1)


def _now() -> datetime:
    return datetime.now(UTC)


async def _crm(db: Database) -> CRM:
    crm = CRM(db)
    await crm.setup()
    return crm


async def _age(db: Database, run_id: str, *, at: datetime | None = None) -> None:
    run = await runs.get(db, run_id)
    assert await runs.heartbeat(db, run_id, run.lease_epoch, now=at or _now() - STALE)


async def _quotes_in_crm(db: Database) -> int:
    async with db.read() as conn:
        stmt = select(func.count()).select_from(crm_tables.quotes)
        return int((await conn.execute(stmt)).scalar_one())


async def test_recover_orphans__zombie_writes_nothing_after_takeover(db: Database) -> None:
    crm = await _crm(db)
    entered, release = asyncio.Event(), asyncio.Event()
    served = 0

    async def gated(messages_: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
        nonlocal served
        served += 1
        if served == 2:  # the model call after lookup_account: the process "hangs" here
            entered.set()
            await release.wait()
        return quotes.quote_script(messages_, tools)

    first = Runtime(db=db, app=quotes.build(crm, ScriptedModel(gated)), owner_id="proc_first")
    second = Runtime(db=db, app=quotes.build(crm), owner_id="proc_second")
    zombie = asyncio.create_task(journeys.start(first, "U_REP", ASK))
    await asyncio.wait_for(entered.wait(), timeout=10)
    held = (await runs.list_runs(db))[0]
    await _age(db, held.id)

    report = await reap.recover_orphans(second)

    assert [r.id for r in report.recovered] == [held.id]
    taken = await runs.get(db, held.id)
    assert taken.state is RunState.suspended and taken.owner_id == "proc_second"
    assert taken.lease_epoch == held.lease_epoch + 1
    convo_before, seq_before = await runs.conversation(db, held.id), taken.event_seq
    release.set()
    seen_by_zombie = await asyncio.wait_for(zombie, timeout=10)

    # The zombie's reply (a draft_quote call) was refused: nothing it wrote landed.
    assert seen_by_zombie.state is RunState.suspended
    after = await runs.get(db, held.id)
    assert await runs.conversation(db, held.id) == convo_before
    assert after.event_seq == seq_before and after.owner_id == "proc_second"
    # Driven exactly once by the new owner: one lookup (the first's), one draft, one card.
    assert [(e.tool, e.status) for e in await ledger.for_run(db, held.id)] == [
        ("lookup_account", LedgerStatus.succeeded), ("draft_quote", LedgerStatus.succeeded)]
    assert await _quotes_in_crm(db) == 1
    assert len(await claims.approvals_of(db, held.id)) == 1
    assert len(await events.for_run(db, held.id, kind="recovered")) == 1


async def test_recover_orphans__two_reapers_take_over_each_orphan_once(db: Database) -> None:
    crm = await _crm(db)
    crashed = Runtime(db=db, app=quotes.build(crm), owner_id="proc_dead")
    ids = [(await journeys.begin(crashed, f"U_{i}", ASK)).id for i in range(3)]
    for run_id in ids:
        await _age(db, run_id)
    reapers = [Runtime(db=db, app=quotes.build(crm), owner_id=f"proc_reaper_{i}")
               for i in range(2)]

    reports = await asyncio.gather(*(reap.recover_orphans(rt) for rt in reapers))

    taken = [r.id for report in reports for r in report.recovered]
    assert sorted(taken) == sorted(ids)
    for run_id in ids:
        run = await runs.get(db, run_id)
        assert run.recovery_attempts == 1 and run.state is RunState.suspended
        recovered = await events.for_run(db, run_id, kind="recovered")
        assert [e.data["attempt"] for e in recovered] == [1]
        assert recovered[0].data["by"] == run.owner_id
        assert [e.tool for e in await ledger.for_run(db, run_id)] == [
            "lookup_account", "draft_quote"]
        assert len(await claims.approvals_of(db, run_id)) == 1
    assert await _quotes_in_crm(db) == 3


async def test_recover_orphans__heartbeat_at_the_boundary_is_not_an_orphan(db: Database) -> None:
    crm = await _crm(db)
    rt = Runtime(db=db, app=quotes.build(crm))
    run = await journeys.begin(rt, "U_REP", ASK)
    now = _now()
    await _age(db, run.id, at=now - rt.orphan_after)

    assert (await reap.recover_orphans(rt, now=now)).empty
    assert (await runs.get(db, run.id)).recovery_attempts == 0

    report = await reap.recover_orphans(rt, now=now + timedelta(microseconds=1))
    assert [r.id for r in report.recovered] == [run.id]
    assert (await runs.get(db, run.id)).state is RunState.suspended


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


class EmptyArgs(BaseModel):
    pass


def _counting_app(executions: list[str], crash: list[bool]) -> App:
    async def count(args: EmptyArgs, ctx: ToolContext) -> dict[str, Any]:
        executions.append(ctx.idempotency_key)
        return {"count": len(executions)}

    def script(messages_: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
        if not any(m.role == "tool" for m in messages_):
            return Message.assistant(None, [ToolCall(name="count", arguments={})])
        if crash and crash.pop():
            raise Crash
        return "counted"

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    tool = Tool(name="count", description="Count, once per call.", args=EmptyArgs,
                execute=count)
    return App(name="counting", tools=[tool], scope=scope, model=ScriptedModel(script))


async def test_recover_orphans__a_tool_result_in_the_messages_is_never_replayed(
    db: Database,
) -> None:
    executions: list[str] = []
    rt = Runtime(db=db, app=_counting_app(executions, crash=[True]))
    with pytest.raises(Crash):
        await journeys.start(rt, "U_REP", "count once")
    run = (await runs.list_runs(db))[0]
    assert run.state is RunState.running and len(executions) == 1
    before = await runs.conversation(db, run.id)
    assert before[-1]["role"] == "tool"
    await _age(db, run.id)

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.recovered] == [run.id]
    final = await runs.get(db, run.id)
    assert final.state is RunState.answered and final.answer == "counted"
    assert len(executions) == 1  # the recovered run did not call the tool again
    assert [(e.tool, e.status) for e in await ledger.for_run(db, run.id)] == [
        ("count", LedgerStatus.succeeded)]
    after = await runs.conversation(db, run.id)
    assert after[:len(before)] == before
    assert sum(1 for m in after if m["role"] == "tool") == 1
    assert final.tool_calls == run.tool_calls == 1


class CrashingCRM(CRM):
    """Every send dies on its way to the CRM, before anything is written."""

    async def send(self, quote_id: str, pricing: Pricing, key: str) -> dict[str, Any]:
        raise Crash


async def test_recover_orphans__exhausted_run_names_the_tool_call_it_left_unknown(
    db: Database,
) -> None:
    crm = CrashingCRM(db)
    await crm.setup()
    rt = Runtime(db=db, app=quotes.build(crm), owner_id="proc_crashing")
    assert rt.max_recovery_attempts == 2
    run = await journeys.start(rt, "U_REP", ASK)
    assert run.pending_token
    with pytest.raises(Crash):  # crash one: approved, then killed mid-send
        await journeys.resume_after_confirmation(rt, run.pending_token, "approve", "U_REP")
    for _ in range(2):  # crashes two and three: each recovery finds the send not done, retries
        await _age(db, run.id)
        with pytest.raises(Crash):
            await reap.recover_orphans(rt)
    [send] = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert send.status is LedgerStatus.started
    await _age(db, run.id)

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.exhausted] == [run.id] and report.recovered == []
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "recovery_exhausted"
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == "recovery_exhausted"
    quote_id = send.args["quote_id"]
    assert quote_id and quote_id == (await _draft_id(db, run.id))
    assert "send_quote may or may not have run" in notice["detail"]
    assert quote_id in notice["detail"] and send.idempotency_key in notice["detail"]
    [failed] = await events.for_run(db, run.id, kind="failed")
    assert failed.data["unknown_calls"] == [{"call_id": send.call_id, "tool": "send_quote",
                                             "args": {"quote_id": quote_id},
                                             "idempotency_key": send.idempotency_key}]
    # Nobody will reconcile it now: the ledger says so, and nothing was sent.
    assert [(e.tool, e.status) for e in await ledger.for_run(db, run.id)] == [
        ("lookup_account", LedgerStatus.succeeded), ("draft_quote", LedgerStatus.succeeded),
        ("send_quote", LedgerStatus.unknown)]
    assert await crm.sent_count() == 0


async def test_recover_orphans__exhausted_run_without_unknown_calls_says_nothing_ran(
    db: Database,
) -> None:
    crm = await _crm(db)
    rt = Runtime(db=db, app=quotes.build(crm), max_recovery_attempts=0)
    run = await journeys.begin(rt, "U_REP", ASK)  # created, then nobody worked on it
    await _age(db, run.id)

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.exhausted] == [run.id]
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["reason"] == "recovery_exhausted"
    assert "may or may not have run" not in notice["detail"]
    assert "signoff runs show" not in notice["detail"]  # operators' advice stays in the CLI
    assert notice["evidence"] == []
    [failed] = await events.for_run(db, run.id, kind="failed")
    assert failed.data["unknown_calls"] == []


async def _draft_id(db: Database, run_id: str) -> str:
    [draft] = [e for e in await ledger.for_run(db, run_id) if e.tool == "draft_quote"]
    return str(draft.result["quote_id"])



class DraftThenCrashCRM(CRM):
    """The first draft is written, then the process dies before signoff records it."""

    crashed = False

    async def draft(self, account: str, sku: str, quantity: int, tier: str,
                    key: str) -> dict[str, Any]:
        row = await super().draft(account, sku, quantity, tier, key)
        if not self.crashed:
            self.crashed = True
            raise Crash
        return row


async def test_recover_orphans__a_keyed_draft_is_drafted_again_not_twice(db: Database) -> None:
    crm = DraftThenCrashCRM(db)
    await crm.setup()
    rt = Runtime(db=db, app=quotes.build(crm))
    with pytest.raises(Crash):
        await journeys.start(rt, "U_REP", ASK)
    [run] = await runs.list_runs(db)
    assert await _quotes_in_crm(db) == 1
    await _age(db, run.id)

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.recovered] == [run.id]
    final = await runs.get(db, run.id)
    assert final.state is RunState.suspended  # on to the send card, with the first draft
    assert await _quotes_in_crm(db) == 1
    assert final.pending and final.pending["args"]["quote_id"] == await _draft_id(db, run.id)


class DraftArgsWithCurrency(quotes.DraftArgs):
    currency: str  # a new required argument: the crashed draft's arguments no longer validate


def _deployed(crm: CRM, change: str) -> App:
    app = quotes.build(crm)
    if change == "dropped":
        tools = [t for t in app.tools if t.name != "draft_quote"]
    else:
        tools = [dataclasses.replace(t, args=DraftArgsWithCurrency)
                 if t.name == "draft_quote" else t for t in app.tools]
    return dataclasses.replace(app, tools=tools)


@pytest.mark.parametrize(("change", "why"), [
    ("dropped", "draft_quote no longer exists"),
    ("args_changed", "the arguments of draft_quote no longer validate"),
])
async def test_recover_orphans__a_started_call_the_new_deploy_cannot_check_fails_outcome_unknown(
    db: Database, change: str, why: str,
) -> None:
    """The draft was written, then the process died; the new deploy cannot reconcile it."""
    crm = DraftThenCrashCRM(db)
    await crm.setup()
    with pytest.raises(Crash):
        await journeys.start(Runtime(db=db, app=quotes.build(crm)), "U_REP", ASK)
    [run] = await runs.list_runs(db)
    [draft] = [e for e in await ledger.for_run(db, run.id) if e.tool == "draft_quote"]
    assert draft.status is LedgerStatus.started and await _quotes_in_crm(db) == 1
    await _age(db, run.id)

    report = await reap.recover_orphans(Runtime(db=db, app=_deployed(crm, change)))

    assert [r.id for r in report.recovered] == [run.id]
    final = await runs.get(db, run.id)
    assert final.state is RunState.failed and final.halt_reason == "outcome_unknown"
    assert [(e.tool, e.status) for e in await ledger.for_run(db, run.id)] == [
        ("lookup_account", LedgerStatus.succeeded), ("draft_quote", LedgerStatus.unknown)]
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == "outcome_unknown"
    assert why in notice["detail"] and "draft_quote may or may not have run" in notice["detail"]
    assert draft.idempotency_key in notice["detail"] and "SKU-4411" in notice["detail"]
    [failed] = await events.for_run(db, run.id, kind="failed")
    assert [c["call_id"] for c in failed.data["unknown_calls"]] == [draft.call_id]
    assert await _quotes_in_crm(db) == 1
