"""Crash tests with real processes: a child is SIGKILLed at a named point, the parent recovers.

The child (tests/resume/crash_child.py) works on the reference quotes run
against the same database and kills itself at ``SIGNOFF_FAULT_AT``. The parent
then makes the run's heartbeat stale by writing it (never by sleeping) and
runs ``recover_orphans``. At every point: the quote is sent exactly once (or
the run fails loudly ``outcome_unknown`` when the tool cannot reconcile), the
run ends answered, suspended, halted or failed, and no committed message is
lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from examples.crm import CRM
from resume import outcomes, reap, runtime
from resume.runtime import Runtime
from store import events, ledger, outbox, runs
from store.engine import Database
from store.records import Run
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.resume import crash_child

REPO = Path(__file__).resolve().parents[2]
SETTLED = {RunState.answered, RunState.suspended, RunState.halted, RunState.failed}


async def _world(db: Database, variant: str = "reconcile") -> tuple[Runtime, CRM]:
    crm = CRM(db)
    await crm.setup()
    return Runtime(db=db, app=crash_child.build_app(crm, variant)), crm


async def _killed_at(point: str, *argv: str) -> None:
    """Run the child with the fault armed; it must die by SIGKILL, not finish."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.resume.crash_child", *argv, cwd=REPO,
        env={**os.environ, "SIGNOFF_FAULT_AT": point},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"child {argv[0]} was not killed at {point} (exit {proc.returncode})\n"
        f"{out.decode()}\n{err.decode()}"
    )


async def _orphaned(db: Database, run_id: str) -> list[dict[str, Any]]:
    """The crash left the run running; age its heartbeat. Returns the committed messages."""
    run = await runs.get(db, run_id)
    assert run.state is RunState.running, run.state
    stale = datetime.now(UTC) - timedelta(hours=1)
    assert await runs.heartbeat(db, run_id, run.lease_epoch, now=stale)
    return await runs.conversation(db, run_id)


async def _recovered(rt: Runtime, run_id: str, before: list[dict[str, Any]]) -> Run:
    report = await reap.recover_orphans(rt)
    assert [r.id for r in report.recovered] == [run_id]
    final = await runs.get(rt.db, run_id)
    assert final.state in SETTLED
    after = await runs.conversation(rt.db, run_id)
    assert after[:len(before)] == before and len(after) >= len(before)
    recovered = await events.for_run(rt.db, run_id, kind="recovered")
    assert [e.data["attempt"] for e in recovered] == [1]
    return final


def _only_run(runs_found: list[Run]) -> Run:
    assert len(runs_found) == 1
    return runs_found[0]


EXPECTED_RECONCILE = {
    runtime.AFTER_LEDGER_STARTED: ["not_done"],  # the send never happened: sent now, once
    runtime.AFTER_TOOL_WRITE: ["done"],  # it happened: the CRM's record becomes the result
    runtime.AFTER_RESULT_COMMIT: [],
    runtime.DURING_MODEL_CALL: [],
}


@pytest.mark.parametrize("point", runtime.CRASH_POINTS)
async def test_crash__killed_in_the_confirmed_send_sends_the_quote_once(
    database_url: str, db: Database, point: str
) -> None:
    rt, crm = await _world(db)
    run = await journeys.start(rt, crash_child.REQUESTER, crash_child.ASK)
    assert run.state is RunState.suspended and run.pending_token

    await _killed_at(point, "approve", database_url, "reconcile", run.pending_token)
    before = await _orphaned(db, run.id)
    final = await _recovered(rt, run.id, before)

    assert final.state is RunState.answered, (final.halt_reason, final.answer)
    assert await crm.sent_count("Henderson") == 1
    sends = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert [e.status for e in sends] == [LedgerStatus.succeeded]
    reconciled = await events.for_run(db, run.id, kind="reconciled")
    assert [e.data["outcome"] for e in reconciled] == EXPECTED_RECONCILE[point]
    notice = (await outbox.for_run(db, run.id))[-1]
    assert notice.kind == "run_notice" and notice.payload["event"] == "answered"
    assert [e["tool"] for e in notice.payload["evidence"]] == [
        "lookup_account", "draft_quote", "send_quote"]


async def test_crash__unreconcilable_send_fails_loudly_outcome_unknown(
    database_url: str, db: Database
) -> None:
    point = runtime.AFTER_TOOL_WRITE  # the write happened; the tool cannot say so
    rt, crm = await _world(db, "blind")
    run = await journeys.start(rt, crash_child.REQUESTER, crash_child.ASK)
    assert run.pending_token

    await _killed_at(point, "approve", database_url, "blind", run.pending_token)
    before = await _orphaned(db, run.id)
    final = await _recovered(rt, run.id, before)

    assert final.state is RunState.failed and final.halt_reason == "outcome_unknown"
    # Never twice: the send is not repeated; whether it happened is for a person to check.
    assert await crm.sent_count() == 1
    sends = [e for e in await ledger.for_run(db, run.id) if e.tool == "send_quote"]
    assert [e.status for e in sends] == [LedgerStatus.unknown]
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == "outcome_unknown"
    assert "send_quote" in notice["detail"] and sends[0].args["quote_id"] in notice["detail"]


async def test_crash__killed_while_starting_recovers_to_the_approval(
    database_url: str, db: Database
) -> None:
    # The first write reached is lookup_account's: idempotent, so it is called again
    # with the same key. (The model-call point is covered above and by the next test.)
    point = runtime.AFTER_TOOL_WRITE
    rt, crm = await _world(db)

    await _killed_at(point, "start", database_url, "reconcile")
    orphan = _only_run(await runs.list_runs(db))
    before = await _orphaned(db, orphan.id)
    final = await _recovered(rt, orphan.id, before)

    assert final.state is RunState.suspended and final.pending_token
    assert await crm.sent_count() == 0
    lookups = [e for e in await ledger.for_run(db, orphan.id) if e.tool == "lookup_account"]
    assert [e.status for e in lookups] == [LedgerStatus.succeeded]
    cards = [r for r in await outbox.for_run(db, orphan.id) if r.kind == "approval_card"]
    assert len(cards) == 1
    # The recovered run is an ordinary suspension: approving it sends once.
    result = await journeys.resume_after_confirmation(
        rt, final.pending_token, "approve", crash_child.REQUESTER)
    assert isinstance(result, outcomes.Executed)
    assert await crm.sent_count("Henderson") == 1
    assert (await runs.get(db, orphan.id)).state is RunState.answered


async def test_crash__three_crashes_fail_recovery_exhausted_and_the_reaper_stops(
    database_url: str, db: Database
) -> None:
    rt, crm = await _world(db)
    assert rt.max_recovery_attempts == 2

    # Crash one: created, then nobody worked on it (as if killed right after the insert).
    run_id = (await journeys.begin(rt, crash_child.REQUESTER, crash_child.ASK)).id
    for attempt in (1, 2):  # crashes two and three: each recovery is killed too
        await _orphaned(db, run_id)
        await _killed_at(runtime.DURING_MODEL_CALL, "recover", database_url, "reconcile")
        assert (await runs.get(db, run_id)).recovery_attempts == attempt
    before = await _orphaned(db, run_id)

    report = await reap.recover_orphans(rt)

    assert report.recovered == [] and [r.id for r in report.exhausted] == [run_id]
    final = await runs.get(db, run_id)
    assert final.state is RunState.failed and final.halt_reason == "recovery_exhausted"
    assert final.recovery_attempts == 2 and final.heartbeat_at is None
    assert await runs.conversation(db, run_id) == before
    assert [e.data["attempt"] for e in await events.for_run(db, run_id, kind="recovered")] == [
        1, 2]
    notice = (await outbox.for_run(db, run_id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == "recovery_exhausted"
    assert await crm.sent_count() == 0
    # The reaper does not loop: another pass finds nothing and writes nothing.
    seq = final.event_seq
    again = await reap.recover_orphans(rt)
    assert again.empty
    assert (await runs.get(db, run_id)).event_seq == seq
