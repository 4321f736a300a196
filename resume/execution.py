"""Running a tool call through the ledger, and asking a tool about an earlier attempt.

``started`` is committed before the tool runs; its result, the tool-result
message and the run's budget are committed together after. An attempt whose
outcome is unknown is reconciled before anything else: the tool says whether
it happened; if it cannot say, the run fails loudly rather than risk it twice.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from resume import budget, faults, tools
from resume.held import HeldRun, ledger_result
from resume.messages import ToolCall
from resume.outcomes import Executed
from resume.tools import Tool, ToolContext
from store import errors
from store.effects import Effects, LedgerCompletion
from store.events import EventKind
from store.reasons import FailReason
from store.records import LedgerEntry, Run
from store.states import LedgerStatus

log = logging.getLogger(__name__)


def context(held: HeldRun, call: ToolCall, *, confirmed: bool) -> ToolContext:
    return ToolContext(run_id=held.run.id, user_id=held.run.user_id, scope=held.scope,
                       idempotency_key=idempotency_key(held.run.id, call.id), confirmed=confirmed,
                       run=held.run)


def idempotency_key(run_id: str, call_id: str) -> str:
    """Stable across crashes and replicas: the same call always has the same key."""
    return f"{run_id}:{call_id}"


async def execute(
    held: HeldRun, call: ToolCall, tool: Tool[Any], args: BaseModel, *, confirmed: bool,
    entry: LedgerEntry | None = None,
) -> Run | None:
    """Run the tool through the ledger: ``started`` committed first, result committed after."""
    bound = budget.exceeded_before_tool(held.run)
    if bound is not None:
        return await held.halt(bound)
    ctx = context(held, call, confirmed=confirmed)
    if entry is None:
        entry = await held.start_call(call.id, tool.name, call.arguments, ctx.idempotency_key)
    faults.point(faults.AFTER_LEDGER_STARTED)
    status = LedgerStatus.succeeded
    try:
        result: Any = await tool.execute(args, ctx)
    except errors.DatabaseUnavailable:
        # The store is out of reach (an app's tools may share it): whether the write
        # happened is unknown, and nothing could be recorded anyway. The call stays
        # ``started``; recovery reconciles it once the database is back.
        raise
    except Exception as exc:  # a tool's failure is information for the model, not a crash
        log.warning("tool %s failed in run %s: %r", tool.name, held.run.id, exc,
                    extra={"action": "tool_failed", "run_id": held.run.id})
        status, result = LedgerStatus.failed, {"error": type(exc).__name__, "message": str(exc)}
    faults.point(faults.AFTER_TOOL_WRITE)
    stored = ledger_result(result)
    # Only this process knows the result now: hold it through a short database outage.
    run = await held.tool_result(
        call.id, tool.name, result, counts_as_call=True, hold=True,
        settles=LedgerCompletion(call.id, status, stored),
        events=[(EventKind.tool, {"call_id": call.id, "tool": tool.name, "status": status.value,
                          "confirmed": confirmed, "key": ctx.idempotency_key})],
    )
    faults.point(faults.AFTER_RESULT_COMMIT)
    if status is LedgerStatus.succeeded:
        held.settled[call.id] = Executed(run, result)
    return None


async def reconcile(
    held: HeldRun, call: ToolCall, tool: Tool[Any], args: BaseModel, entry: LedgerEntry,
    *, confirmed: bool,
) -> Run | None:
    """An earlier attempt's outcome is unknown: ask the tool before anything else."""
    if tool.reconcile is not None:
        verdict = await tool.reconcile(entry.idempotency_key, args)
    elif tool.idempotent:
        verdict = tools.Reconciliation.not_done()  # safe to call again with the same key
    else:
        verdict = tools.Reconciliation.cannot_tell()
    event = {"call_id": call.id, "tool": tool.name, "outcome": verdict.outcome}
    if verdict.outcome == "done":
        run = await held.tool_result(
            call.id, tool.name, verdict.result, counts_as_call=True,
            settles=LedgerCompletion(call.id, LedgerStatus.succeeded,
                                     ledger_result(verdict.result)),
            events=[(EventKind.reconciled, event)],
        )
        held.settled[call.id] = Executed(run, verdict.result)
        return None
    if verdict.outcome == "not_done":
        await held.record(Effects(events=[(EventKind.reconciled, event)]))
        return await execute(held, call, tool, args, confirmed=confirmed, entry=entry)
    return await held.fail_naming(
        FailReason.outcome_unknown,
        f"{tool.name} cannot tell whether its earlier call took effect.", [entry],
        events=[(EventKind.reconciled, event)])


async def unreconcilable(held: HeldRun, entry: LedgerEntry, changed: str) -> Run:
    """A started call this deployment cannot ask about: its outcome stays unknown."""
    event = {"call_id": entry.call_id, "tool": entry.tool, "outcome": "cannot_tell",
             "because": changed}
    return await held.fail_naming(
        FailReason.outcome_unknown, f"{changed}, so its earlier call cannot be checked.",
        [entry], events=[(EventKind.reconciled, event)])


