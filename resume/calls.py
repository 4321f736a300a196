"""One tool call of the model's: check it, suspend for a person, or run it through the ledger.

The checks run in a fixed order, each returning a named outcome: the tool
exists and the route allows it; the arguments validate; the scope permits it;
the ledger has no earlier attempt (never replay; reconcile an unknown one);
a person approved it where one must (preview digest and guards re-checked
against the world as it is now); only then does the tool run.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from resume import budget, faults, notify, tools
from resume.messages import ToolCall
from resume.notices import ApprovalCard, OutboxKind
from resume.outcomes import Blocked, Declined, DetailsChanged, Executed, NoLongerPermitted
from resume.routes import Routed
from resume.tools import Preview, Tool, ToolContext
from resume.worker import Worker, ledger_result
from store import approvals, errors, ledger, runs
from store.effects import Effects, LedgerCompletion
from store.records import Approval, LedgerEntry, Run
from store.states import LedgerStatus

log = logging.getLogger(__name__)

DECLINED = "declined_by_user"
OUTCOME_UNKNOWN = "outcome_unknown"


async def handle(w: Worker, call: ToolCall, route: Routed | None) -> Run | None:
    """Settle one call; return the run if it stopped (suspended, halted, failed)."""
    # The ledger first: a call that already started is settled by what it did, even
    # if this deployment no longer has the tool, allows it, or accepts its arguments.
    entry = await ledger.get(w.rt.db, w.run.id, call.id)
    if entry is not None and entry.status in (LedgerStatus.succeeded, LedgerStatus.failed):
        # Never replay: the result is already known; only the message may be missing.
        return await _replay_result(w, call, entry)
    checked = _checked(w, call, route)
    if isinstance(checked, _Refused):
        if entry is not None:
            return await _unreconcilable(w, entry, checked.changed)
        return await _error(w, call, checked.code, checked.message)
    tool, args = checked
    decision = await latest_approval(w, call.id)
    if entry is not None:
        return await _reconcile(w, call, tool, args, entry, confirmed=decision is not None)
    decided = decision is not None and decision.decision is not None
    if not w.scope.permits(tool.name) and not decided:
        # Nobody has said yes: refuse to the model rather than ask a person for a
        # call the requester may not make. (A decided call halts instead: _approved.)
        return await _error(w, call, "not_permitted",
                            f"{w.run.user_id} may not use {tool.name}")
    if not tool.needs_confirmation(args, w.scope):
        return await execute(w, call, tool, args, confirmed=False)
    if decision is None or decision.decision is None:
        return await suspend(w, call, tool, args, previous=decision)
    if decision.decision == "decline":
        content = {"error": DECLINED, "reason": decision.reason,
                   "message": f"{decision.decided_by} declined this request"}
        run = await w.tool_result(call.id, tool.name, content,
                                  events=[("declined", {"call_id": call.id, "by":
                                                        decision.decided_by})])
        w.settled[call.id] = Declined(run, decision.reason)
        return None
    return await _approved(w, call, tool, args, decision)


@dataclass(frozen=True)
class _Refused:
    code: str
    #: For the model, as the call's result.
    message: str
    #: For a person, when an earlier attempt of the call cannot be checked because of it.
    changed: str


def _checked(
    w: Worker, call: ToolCall, route: Routed | None
) -> tuple[Tool[Any], BaseModel] | _Refused:
    """The tool exists and the route allows it; the arguments validate."""
    tool = w.rt.app.tool(call.name)
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
    w: Worker, call: ToolCall, tool: Tool[Any], args: BaseModel, approval: Approval
) -> Run | None:
    """Re-check an approved call against now: scope, preview digest, guards; then run it."""
    now = w.rt.now()
    if not w.scope.permits(tool.name):
        upd = notify.card_update(w.run, approval.token, "no_longer_permitted", at=now)
        run = await w.halt("no_longer_permitted", outbox=[upd],
                           detail=f"{w.run.user_id} may no longer use {tool.name}")
        w.settled[call.id] = NoLongerPermitted(run)
        return run
    preview = await tool.render_preview(args, w.scope)
    if preview.digest() != approval.digest:
        return await suspend(w, call, tool, args, previous=approval, preview=preview)
    ctx = _context(w, call, confirmed=True)
    guard = await tool.check(args, w.scope, ctx)
    if not guard.ok:
        code, message = guard.code or "guard_failed", guard.message or "a check failed"
        upd = notify.card_update(w.run, approval.token, "guard_failed", at=now,
                                 actor=approval.decided_by, reason=message)
        run = await w.tool_result(call.id, tool.name, {"error": code, "message": message},
                                  events=[("guard_failed", {"call_id": call.id, "code": code})],
                                  outbox=[upd])
        w.settled[call.id] = Blocked(run, code, message)
        return None
    return await execute(w, call, tool, args, confirmed=True)


async def latest_approval(w: Worker, call_id: str) -> Approval | None:
    mine = [a for a in await approvals.for_run(w.rt.db, w.run.id) if a.call_id == call_id]
    return mine[-1] if mine else None


def _context(w: Worker, call: ToolCall, *, confirmed: bool) -> ToolContext:
    return ToolContext(run_id=w.run.id, user_id=w.run.user_id, scope=w.scope,
                       idempotency_key=idempotency_key(w.run.id, call.id), confirmed=confirmed,
                       run=w.run)


def idempotency_key(run_id: str, call_id: str) -> str:
    """Stable across crashes and replicas: the same call always has the same key."""
    return f"{run_id}:{call_id}"


async def suspend(
    w: Worker, call: ToolCall, tool: Tool[Any], args: BaseModel, *,
    previous: Approval | None, preview: Preview | None = None,
) -> Run:
    """running -> suspended with a fresh token; when re-asking, the card carries the diff."""
    now = w.rt.now()
    preview = preview or await tool.render_preview(args, w.scope)
    token = secrets.token_urlsafe(24)
    outbox: list[tuple[str, dict[str, Any]]] = []
    changes = None
    if previous is not None and previous.digest != preview.digest():
        old = Preview.model_validate(previous.card["preview"])
        changes = tools.diff(old, preview)
        if previous.decision is not None:
            outbox.append(notify.card_update(w.run, previous.token, "superseded", at=now,
                                             actor=previous.decided_by))
    card = ApprovalCard(
        run_id=w.run.id, token=token, requester=w.run.user_id, question=w.run.question,
        tool=tool.name, dangerous=tool.dangerous, preview=preview.data(),
        budget=notify.budget_data(w.run), expires_at=(now + w.rt.suspension_ttl).timestamp(),
        approvers=tool.approvers.listed(w.run.user_id),
        approvers_policy=tool.approvers.policy(), channel=w.channel, diff=changes,
        replaces_token=previous.token if previous is not None and changes is not None else None,
    ).model_dump(mode="json")
    outbox.insert(0, (OutboxKind.approval_card.value, card))
    suspension = runs.Suspension(
        call_id=call.id, tool=tool.name,
        pending={"call_id": call.id, "tool": tool.name, "args": call.arguments},
        preview=preview.model_dump(mode="json"), digest=preview.digest(), token=token,
        expires_at=now + w.rt.suspension_ttl, card=card,
    )
    event = {"call_id": call.id, "tool": tool.name, "digest": preview.digest(),
             "expires_at": suspension.expires_at.isoformat(),
             "changes": [c.model_dump() for c in changes] if changes else None}
    try:
        w.run = await runs.suspend(
            w.rt.db, w.run.id, w.epoch, suspension, now=now, elapsed_ms=w.elapsed_ms(),
            fx=Effects(events=[("resuspended" if changes else "suspended", event)],
                       outbox=outbox),
        )
    except (errors.PayloadTooLarge, errors.NotSerializable) as exc:
        return await w.fail("preview_too_large", detail=str(exc))
    if changes is not None:
        w.settled[call.id] = DetailsChanged(w.run, changes)
    return w.run


async def execute(
    w: Worker, call: ToolCall, tool: Tool[Any], args: BaseModel, *, confirmed: bool,
    entry: LedgerEntry | None = None,
) -> Run | None:
    """Run the tool through the ledger: ``started`` committed first, result committed after."""
    bound = budget.exceeded_before_tool(w.run)
    if bound is not None:
        return await w.halt(bound)
    ctx = _context(w, call, confirmed=confirmed)
    if entry is None:
        entry = await ledger.start(w.rt.db, w.run.id, w.epoch, call_id=call.id, tool=tool.name,
                                   args=call.arguments, idempotency_key=ctx.idempotency_key,
                                   now=w.rt.now())
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
        log.warning("tool %s failed in run %s: %r", tool.name, w.run.id, exc,
                    extra={"action": "tool_failed", "run_id": w.run.id})
        status, result = LedgerStatus.failed, {"error": type(exc).__name__, "message": str(exc)}
    faults.point(faults.AFTER_TOOL_WRITE)
    stored = ledger_result(result)
    # Only this process knows the result now: hold it through a short database outage.
    run = await w.tool_result(
        call.id, tool.name, result, counts_as_call=True, hold=True,
        ledger=LedgerCompletion(call.id, status, stored),
        events=[("tool", {"call_id": call.id, "tool": tool.name, "status": status.value,
                          "confirmed": confirmed, "key": ctx.idempotency_key})],
    )
    faults.point(faults.AFTER_RESULT_COMMIT)
    if status is LedgerStatus.succeeded:
        w.settled[call.id] = Executed(run, result)
    return None


async def _reconcile(
    w: Worker, call: ToolCall, tool: Tool[Any], args: BaseModel, entry: LedgerEntry,
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
        run = await w.tool_result(
            call.id, tool.name, verdict.result, counts_as_call=True,
            ledger=LedgerCompletion(call.id, LedgerStatus.succeeded, ledger_result(verdict.result)),
            events=[("reconciled", event)],
        )
        w.settled[call.id] = Executed(run, verdict.result)
        return None
    if verdict.outcome == "not_done":
        await w.record(Effects(events=[("reconciled", event)]))
        return await execute(w, call, tool, args, confirmed=confirmed, entry=entry)
    return await fail(w, OUTCOME_UNKNOWN, f"{tool.name} cannot tell whether its earlier call "
                      "took effect.", [entry], events=[("reconciled", event)])


async def _unreconcilable(w: Worker, entry: LedgerEntry, changed: str) -> Run:
    """A started call this deployment cannot ask about: its outcome stays unknown."""
    event = {"call_id": entry.call_id, "tool": entry.tool, "outcome": "cannot_tell",
             "because": changed}
    return await fail(w, OUTCOME_UNKNOWN, f"{changed}, so its earlier call cannot be checked.",
                      [entry], events=[("reconciled", event)])


def unknown_call(entry: LedgerEntry) -> str:
    """One call whose write may or may not have happened: the tool, its arguments, its key."""
    return (f"{entry.tool} may or may not have run with arguments {entry.args} "
            f"(idempotency key {entry.idempotency_key})")


def failure_effects(
    run: Run, reason: str, detail: str, unknown: Sequence[LedgerEntry], *,
    channel: str | None, events: Sequence[tuple[str, dict[str, Any]]] = (), **data: Any,
) -> Effects:
    """A failure that names each call still ``started``, for a person to check.

    Nobody will reconcile those calls once the run has failed, so the ledger
    records their outcome as ``unknown`` in the same transaction.
    """
    if unknown:
        lead = f"{detail.rstrip('.')}. " if detail else ""
        detail = lead + "; ".join(unknown_call(e) for e in unknown)
        detail += "; check before asking again."
    named = [{"call_id": e.call_id, "tool": e.tool, "args": e.args,
              "idempotency_key": e.idempotency_key} for e in unknown]
    return Effects(
        events=[*events, ("failed", {"reason": reason, "detail": detail, **data,
                                     "unknown_calls": named})],
        outbox=[notify.notice(run, "failed", channel=channel, reason=reason, detail=detail)],
        ledger=[LedgerCompletion(e.call_id, LedgerStatus.unknown, None) for e in unknown],
    )


async def fail(
    w: Worker, reason: str, detail: str, unknown: Sequence[LedgerEntry], *,
    events: Sequence[tuple[str, dict[str, Any]]] = (),
) -> Run:
    """running -> failed(reason), naming (and closing as ``unknown``) the calls in ``unknown``."""
    return await w.fail_with(reason, failure_effects(w.run, reason, detail, unknown,
                                                     channel=w.channel, events=events))


async def _replay_result(w: Worker, call: ToolCall, entry: LedgerEntry) -> Run | None:
    await w.tool_result(call.id, entry.tool, entry.result,
                        events=[("replayed_from_ledger", {"call_id": call.id})])
    return None


async def _error(w: Worker, call: ToolCall, code: str, message: str) -> Run | None:
    await w.tool_result(call.id, call.name, {"error": code, "message": message},
                        events=[("tool_refused", {"call_id": call.id, "code": code})])
    return None
