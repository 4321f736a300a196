"""A run that fails while a tool call is still ``started`` names that call for a person.

The call's write may or may not have happened, and nothing will reconcile it
once the run has failed: the notice and the ``failed`` event name the tool, its
arguments and its idempotency key, and the ledger records the outcome as
``unknown``. Here the failure comes before the loop reaches the call: the route
table changed under it, or asking the tool about it raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from resume import calls, drive, reap
from resume.apps import App
from resume.held import HeldRun
from resume.messages import Message, ToolCall, ToolSpec
from resume.routes import Branch, Routed, RouteDecision, Router
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from resume.tools import Reconciliation, Scope, Tool, ToolContext
from store import events, ledger, outbox, runs
from store.engine import Database
from store.records import LedgerEntry, Run
from store.states import LedgerStatus, RunState
from tests import journeys


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


class NoteArgs(BaseModel):
    note: str


async def _cannot_reach(key: str, args: NoteArgs) -> Reconciliation:
    raise RuntimeError("notes service unreachable")


def _notes_app(writes: list[str], *, instructions: str = "Write the note once.",
               reconcile: bool = False) -> App:
    """One routed tool, ``write``, whose first call writes and then 'crashes' the process."""

    async def write(args: NoteArgs, ctx: ToolContext) -> dict[str, Any]:
        writes.append(ctx.idempotency_key)
        raise Crash

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
        if not any(m.role == "tool" for m in messages):
            return Message.assistant(None, [ToolCall(name="write", arguments={"note": "hello"})])
        return "written"

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    async def decide(question: str, user_id: str) -> RouteDecision:
        return RouteDecision(route="notes", basis="always")

    router = Router(name="desk", decide=decide,
                    table={"notes": Branch(instructions=instructions, tools=["write"])})
    tool = Tool(name="write", description="Write a note.", args=NoteArgs, execute=write,
                reconcile=_cannot_reach if reconcile else None)
    return App(name="notes", tools=[tool], scope=scope, model=ScriptedModel(script),
               router=router)


async def _crashed_mid_write(db: Database) -> tuple[Run, LedgerEntry]:
    writes: list[str] = []
    with pytest.raises(Crash):
        await journeys.start(Runtime(db=db, app=_notes_app(writes)), "U_REP", "write hello")
    [run] = await runs.list_runs(db)
    [entry] = await ledger.for_run(db, run.id)
    assert run.state is RunState.running and entry.status is LedgerStatus.started
    assert writes == [entry.idempotency_key]
    stale = datetime.now(UTC) - timedelta(hours=1)
    assert await runs.heartbeat(db, run.id, run.lease_epoch, now=stale)
    return run, entry


async def _assert_names_the_unknown_write(db: Database, run_id: str, reason: str,
                                          entry: LedgerEntry) -> str:
    final = await runs.get(db, run_id)
    assert final.state is RunState.failed and final.halt_reason == reason
    [after] = await ledger.for_run(db, run_id)
    assert after.status is LedgerStatus.unknown
    notice = (await outbox.for_run(db, run_id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == reason
    detail = str(notice["detail"])
    assert "write may or may not have run" in detail and "hello" in detail
    assert entry.idempotency_key in detail and "check before asking again" in detail
    [failed] = await events.for_run(db, run_id, kind="failed")
    assert failed.data["unknown_calls"] == [{"call_id": entry.call_id, "tool": "write",
                                             "args": {"note": "hello"},
                                             "idempotency_key": entry.idempotency_key}]
    return detail


async def test_unknown_calls__route_table_changed_names_the_started_write(db: Database) -> None:
    run, entry = await _crashed_mid_write(db)
    writes: list[str] = []
    redeployed = Runtime(db=db, app=_notes_app(writes, instructions="Write notes politely."))

    report = await reap.recover_orphans(redeployed)

    assert [r.id for r in report.recovered] == [run.id]
    detail = await _assert_names_the_unknown_write(db, run.id, "route_table_changed", entry)
    assert "route table" in detail
    assert writes == []


async def test_unknown_calls__internal_error_names_the_started_write(db: Database) -> None:
    run, entry = await _crashed_mid_write(db)
    writes: list[str] = []
    redeployed = Runtime(db=db, app=_notes_app(writes, reconcile=True))

    report = await reap.recover_orphans(redeployed)

    assert [r.id for r in report.recovered] == [run.id]
    detail = await _assert_names_the_unknown_write(db, run.id, "internal_error", entry)
    assert "notes service unreachable" in detail
    assert writes == []


async def test_unknown_calls__a_started_call_its_route_no_longer_allows_is_not_refused_quietly(
    db: Database,
) -> None:
    """Handled directly: a changed route table stops the loop before it reaches the call."""
    run, entry = await _crashed_mid_write(db)
    writes: list[str] = []
    rt = Runtime(db=db, app=_notes_app(writes))
    convo = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    worker = HeldRun(rt, await runs.get(db, run.id), convo, scope=await rt.app.scope("U_REP"))
    [call] = drive.outstanding(convo)
    narrowed = Routed("notes", Branch(instructions="Only read.", tools=[]))

    stopped = await calls.handle(worker, call, narrowed)

    assert stopped is not None
    detail = await _assert_names_the_unknown_write(db, run.id, "outcome_unknown", entry)
    assert "route 'notes' no longer allows write" in detail
    assert writes == []
