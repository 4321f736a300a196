"""One tool call of the model's: decide what it needs (refuse it, ask a person, run it).

The checks run in a fixed order, each returning a named outcome: the tool
exists and the route allows it; the arguments validate; the scope permits it;
the ledger has no earlier attempt (never replay; reconcile an unknown one);
the guard passes before a person is asked; a person approved it where one
must (guards and preview digest re-checked against now); only then does the tool run, through the
ledger: ``started`` committed first, its result committed after. Every write
goes through the ``HeldRun``.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from resume import budget, outbox, runtime, tools
from resume.held import HeldRun, ledger_result
from resume.messages import ToolCall
from resume.outbox import ApprovalCard, OutboxKind
from resume.outcomes import Blocked, Declined, Executed, NoLongerPermitted
from resume.routes import Routed
from resume.tools import Preview, Tool, ToolContext
from store import claims, errors, ledger, runs
from store.events import EventKind
from store.reasons import FailReason, HaltReason
from store.records import Approval, LedgerEntry, Run
from store.states import LedgerStatus
from store.transitions import Effects, LedgerCompletion

log = logging.getLogger(__name__)

DECLINED = "declined_by_user"


async def handle(held: HeldRun, call: ToolCall, route: Routed | None) -> Run | None:
    """Settle one call; return the run if it stopped (suspended, halted, failed)."""
    # The ledger first: a started call is settled by what it did, even if this
    # deployment no longer has the tool, allows it, or accepts its arguments.
    entry = await ledger.get(held.rt.db, held.run.id, call.id)
    if entry is not None and entry.status in (LedgerStatus.succeeded, LedgerStatus.failed):
        # Never replay: the result is already known; only the message may be missing.
        return await _replay_result(held, call, entry)
    checked = _checked(held, call, route)
    if isinstance(checked, _Refused):
        if entry is not None:
            return await unreconcilable(held, entry, checked.changed)
        return await _error(held, call, checked.code, checked.message)
    tool, args = checked
    decision = await latest_approval(held, call.id)
    if entry is not None:
        return await reconcile(held, call, tool, args, entry, confirmed=decision is not None)
    decided = decision is not None and decision.decision is not None
    if not held.scope.permits(tool.name) and not decided:
        # Nobody has said yes: refuse to the model rather than ask a person for a
        # call the requester may not make. (A decided call halts instead: _approved.)
        return await _error(held, call, "not_permitted",
                            f"{held.run.user_id} may not use {tool.name}")
    if not tool.needs_confirmation(args, held.scope):
        return await execute(held, call, tool, args, confirmed=False)
    if decision is None:
        # Checked before anyone is asked too: a call the guard already refuses
        # never reaches an approver, and the model gets the guard's answer.
        blocked = await _guard(held, call, tool, args, confirmed=False)
        if blocked is not None:
            return await _blocked(held, call, tool, blocked)
    if decision is None or decision.decision is None:
        return await suspend(held, call, tool, args, previous=decision)
    if decision.decision == "decline":
        content = {"error": DECLINED, "reason": decision.reason,
                   "message": "The approver declined this request; it was not carried out."}
        event = {"call_id": call.id, "by": decision.decided_by}
        run = await held.tool_result(call.id, tool.name, content,
                                     events=[(EventKind.declined, event)])
        held.settled[call.id] = Declined(run, decision.reason)
        return None
    return await _approved(held, call, tool, args, decision)


@dataclass(frozen=True)
class _Refused:
    code: str
    message: str  #: for the model, as the call's result
    #: For a person, when an earlier attempt of the call cannot be checked because of it.
    changed: str


def _checked(
    held: HeldRun, call: ToolCall, route: Routed | None
) -> tuple[Tool[Any], BaseModel] | _Refused:
    """The tool exists and the route allows it; the arguments validate."""
    tool = held.rt.app.tool(call.name)
    unknown = f"no tool named {call.name!r} is available"
    if tool is None:
        return _Refused("unknown_tool", unknown,
                        f"{call.name} no longer exists in this deployment")
    if route is not None and call.name not in route.branch.tools:
        return _Refused("unknown_tool", unknown,
                        f"route {route.route!r} no longer allows {call.name}")
    if call.malformed:
        return _Refused("invalid_arguments", "arguments are not a JSON object",
                        f"the arguments of {call.name} are not a JSON object")
    try:
        return tool, tool.parse(call.arguments)
    except ValidationError as exc:
        message = tools.validation_message(exc)
        return _Refused("invalid_arguments", message,
                        f"the arguments of {call.name} no longer validate ({message})")


async def _approved(
    held: HeldRun, call: ToolCall, tool: Tool[Any], args: BaseModel, approval: Approval
) -> Run | None:
    """Re-check an approved call against now: scope, guards, preview digest; then run it."""
    now = held.rt.now()
    if not held.scope.permits(tool.name):
        upd = outbox.card_update(held.run, approval.token, "no_longer_permitted", at=now)
        run = await held.halt(HaltReason.no_longer_permitted, rows=[upd],
                           detail=f"{held.run.user_id} may no longer use {tool.name}")
        held.settled[call.id] = NoLongerPermitted(run)
        return run
    # The guard first: a call it refuses now is never asked about again, changed or not.
    blocked = await _guard(held, call, tool, args, confirmed=True)
    if blocked is not None:
        upd = outbox.card_update(held.run, approval.token, "guard_failed", at=now,
                                 actor=approval.decided_by, reason=blocked[1])
        return await _blocked(held, call, tool, blocked, rows=[upd])
    preview = await tool.render_preview(args, held.scope)
    if preview.digest() != approval.digest:
        return await suspend(held, call, tool, args, previous=approval, preview=preview)
    return await execute(held, call, tool, args, confirmed=True)


async def _guard(
    held: HeldRun, call: ToolCall, tool: Tool[Any], args: BaseModel, *, confirmed: bool
) -> tuple[str, str] | None:
    """The guard's (code, message) when it refuses the call now; None when it passes."""
    guard = await tool.check(args, held.scope, context(held, call, confirmed=confirmed))
    return None if guard.ok else (guard.code or "guard_failed", guard.message or "a check failed")


async def _blocked(
    held: HeldRun, call: ToolCall, tool: Tool[Any], blocked: tuple[str, str], *,
    rows: list[tuple[str, dict[str, Any]]] | None = None,
) -> Run | None:
    """The guard's answer goes to the model as the call's result."""
    (code, message), event = blocked, {"call_id": call.id, "code": blocked[0]}
    run = await held.tool_result(call.id, tool.name, {"error": code, "message": message},
                                 events=[(EventKind.guard_failed, event)], rows=rows or [])
    held.settled[call.id] = Blocked(run, code, message)
    return None


async def latest_approval(held: HeldRun, call_id: str) -> Approval | None:
    mine = [a for a in await claims.approvals_of(held.rt.db, held.run.id) if a.call_id == call_id]
    return mine[-1] if mine else None


async def suspend(
    held: HeldRun, call: ToolCall, tool: Tool[Any], args: BaseModel, *,
    previous: Approval | None, preview: Preview | None = None,
) -> Run:
    """running -> suspended with a fresh token; when re-asking, the card carries the diff."""
    now = held.rt.now()
    preview = preview or await tool.render_preview(args, held.scope)
    token = secrets.token_urlsafe(24)
    rows: list[tuple[str, dict[str, Any]]] = []
    changes = None
    if previous is not None and previous.digest != preview.digest():
        old = Preview.model_validate(previous.card["preview"])
        changes = tools.diff(old, preview)
        if previous.decision is not None:
            rows.append(outbox.card_update(held.run, previous.token, "superseded", at=now,
                                             actor=previous.decided_by))
    card = ApprovalCard(
        run_id=held.run.id, token=token, requester=held.run.user_id, question=held.run.question,
        tool=tool.name, dangerous=tool.dangerous, preview=preview.data(),
        budget=outbox.budget_data(held.run), expires_at=(now + held.rt.suspension_ttl).timestamp(),
        approvers=tool.approvers.listed(held.run.user_id),
        approvers_policy=tool.approvers.policy(), channel=held.channel, diff=changes,
        replaces_token=previous.token if previous is not None and changes is not None else None,
    ).model_dump(mode="json")
    rows.insert(0, (OutboxKind.approval_card.value, card))
    suspension = runs.Suspension(
        call_id=call.id, tool=tool.name,
        pending={"call_id": call.id, "tool": tool.name, "args": call.arguments},
        preview=preview.model_dump(mode="json"), digest=preview.digest(), token=token,
        expires_at=now + held.rt.suspension_ttl, card=card,
    )
    event = {"call_id": call.id, "tool": tool.name, "digest": preview.digest(),
             "expires_at": suspension.expires_at.isoformat(),
             "changes": [c.model_dump() for c in changes] if changes else None}
    return await held.suspend(call.id, suspension, event=event, rows=rows, changes=changes)


async def _replay_result(held: HeldRun, call: ToolCall, entry: LedgerEntry) -> Run | None:
    event = (EventKind.replayed_from_ledger, {"call_id": call.id})
    await held.tool_result(call.id, entry.tool, entry.result, events=[event])
    return None


async def _error(held: HeldRun, call: ToolCall, code: str, message: str) -> Run | None:
    await held.tool_result(call.id, call.name, {"error": code, "message": message},
                        events=[(EventKind.tool_refused, {"call_id": call.id, "code": code})])
    return None


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
    runtime.crash_point(runtime.AFTER_LEDGER_STARTED)
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
    runtime.crash_point(runtime.AFTER_TOOL_WRITE)
    stored = ledger_result(result)
    # Only this process knows the result now: hold it through a short database outage.
    run = await held.tool_result(
        call.id, tool.name, result, counts_as_call=True, hold=True,
        settles=LedgerCompletion(call.id, status, stored),
        events=[(EventKind.tool, {"call_id": call.id, "tool": tool.name, "status": status.value,
                          "confirmed": confirmed, "key": ctx.idempotency_key})],
    )
    runtime.crash_point(runtime.AFTER_RESULT_COMMIT)
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


