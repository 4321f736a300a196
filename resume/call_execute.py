"""Entry: the execution claim of an approved external call (``POST .../execute``).

Checked in a fixed order, each step changing nothing unless it decides:

1. the call is approved (else its status: executing, executed, declined...);
2. the preview the agent re-rendered now has the digest the approver saw
   (else the call is pending again, and a card with the diff is posted in
   the card's thread for a fresh decision);
3. the requester may still make the call (else the run halts, as a hosted one);
4. the agent's guard passed (else the call is blocked, and its card says so);
5. the budget allows one more call (else the run halts until continued);
6. the claim: one guarded UPDATE ``approved -> executing``. Of any number of
   concurrent callers, on any replicas, exactly one wins; the ledger records
   the call as ``started`` and the run's budget is charged in the same
   transaction. Every other caller is told who holds it, and since when.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from resume import external, outbox, tools
from resume.outbox import ApprovalCard, OutboxKind
from resume.outcomes import ApiRefusal, ApiRefused, ExecutionClaimed
from resume.runtime import Runtime
from resume.tools import Preview
from store import api_calls, claims, errors, runs
from store.api_calls import RunChange
from store.api_records import ApiCall, ApiKey
from store.events import EventKind
from store.reasons import HaltReason
from store.records import Approval, Run
from store.runs import Suspension
from store.states import CallStatus, RunState
from store.transitions import Effects

log = logging.getLogger(__name__)

_EXECUTED = (CallStatus.succeeded, CallStatus.failed, CallStatus.unknown)


@dataclass(frozen=True)
class Execution:
    preview: Preview
    guard_ok: bool = True
    guard_code: str | None = None
    guard_message: str | None = None
    permitted: bool = True


async def execute(
    rt: Runtime, key: ApiKey, run_id: str, call_id: str, ex: Execution,
) -> ExecutionClaimed | ApiRefused:
    owned = await external.owned_run(rt, key, run_id)
    if isinstance(owned, ApiRefused):
        return owned
    run, _ = owned
    call = await api_calls.get(rt.db, run_id, call_id)
    if call is None:
        return external.call_not_found(run_id, call_id)
    if call.status is not CallStatus.approved:
        return not_approved(call)
    approval = await claims.approval(rt.db, call.token) if call.token else None
    if approval is None:
        return not_approved(call)
    try:
        if ex.preview.digest() != approval.digest:
            return await _changed(rt, run, call, approval, ex.preview)
    except (errors.PayloadTooLarge, errors.NotSerializable) as exc:
        return ApiRefused(ApiRefusal.invalid, str(exc))
    if not ex.permitted:
        return await _no_longer_permitted(rt, run, call, approval)
    if not ex.guard_ok:
        return await _blocked(rt, run, call, approval, ex)
    bound = external.budget_bound(run, call.spend_usd)
    if bound is not None:
        return await external.halt_for_budget(rt, run, bound)
    return await _claim(rt, run, call)


def not_approved(call: ApiCall) -> ApiRefused:
    """Why an execute of ``call`` is refused, from its status."""
    details = {"status": call.status.value,
               "since": call.executed_at.isoformat() if call.executed_at else None,
               "decided_by": call.decided_by}
    if call.status is CallStatus.executing:
        return ApiRefused(ApiRefusal.already_executing,
                          f"call {call.call_id} is being executed since {details['since']}; "
                          "wait for its result", details)
    if call.status in _EXECUTED:
        return ApiRefused(ApiRefusal.already_executed,
                          f"call {call.call_id} was executed at {details['since']} "
                          f"({call.status.value}); it is never executed twice", details)
    return ApiRefused(ApiRefusal.not_approved,
                      f"call {call.call_id} is {call.status.value}, not approved", details)


async def _claim(rt: Runtime, run: Run, call: ApiCall) -> ExecutionClaimed | ApiRefused:
    now = rt.now()
    key = external.idempotency_key(run.id, call.call_id)
    lease = rt.execution_lease.total_seconds()
    change = RunChange(
        expect=(RunState.running,),
        charge_spend_usd=call.spend_usd,
        fx=Effects(events=[(EventKind.executing, {"call_id": call.call_id, "tool": call.tool,
                                          "key": key, "external": True})]),
        ledger_key=key,
    )
    moved = await api_calls.move(
        rt.db, run.id, call.call_id, expect=(CallStatus.approved,), now=now, run=change,
        values={"status": CallStatus.executing.value, "executed_at": now,
                "lease_until": now + timedelta(seconds=lease)},
    )
    if moved is None:
        return await _lost(rt, run, call)
    log.info("run %s: call %s claimed for execution", run.id, call.call_id,
             extra={"action": "execute_claim", "run_id": run.id, "call_id": call.call_id})
    return ExecutionClaimed(moved[0], key, lease)


async def _lost(rt: Runtime, run: Run, call: ApiCall) -> ApiRefused:
    """The claim matched nothing: another caller moved the call, or the run left running."""
    current = await api_calls.get(rt.db, run.id, call.call_id)
    if current is not None and current.status is not CallStatus.approved:
        return not_approved(current)
    now_run = await runs.get(rt.db, run.id)
    return ApiRefused(ApiRefusal.run_not_running,
                      f"run {run.id} is {now_run.state.value}; nothing was executed",
                      {"state": now_run.state.value, "reason": now_run.halt_reason})


async def _changed(
    rt: Runtime, run: Run, call: ApiCall, approval: Approval, preview: Preview,
) -> ApiRefused:
    """Pending again with a new card showing the diff, in the old card's thread."""
    now = rt.now()
    changes = tools.diff(Preview.model_validate(approval.card["preview"]), preview)
    token = secrets.token_urlsafe(24)
    ttl = timedelta(seconds=max(approval.card["expires_at"] - approval.created_at.timestamp(), 1))
    card = ApprovalCard.model_validate({
        **approval.card, "token": token, "preview": preview.data().model_dump(mode="json"),
        "budget": outbox.budget_data(run).model_dump(mode="json"),
        "expires_at": (now + ttl).timestamp(),
        "diff": [c.model_dump(mode="json") for c in changes], "replaces_token": approval.token,
    }).model_dump(mode="json")
    suspension = Suspension(
        call_id=call.call_id, tool=call.tool,
        pending={"call_id": call.call_id, "tool": call.tool, "args": call.args},
        preview=preview.model_dump(mode="json"), digest=preview.digest(), token=token,
        expires_at=now + ttl, card=card,
    )
    event = {"call_id": call.call_id, "tool": call.tool, "digest": preview.digest(),
             "expires_at": suspension.expires_at.isoformat(),
             "changes": [c.model_dump() for c in changes], "external": True}
    change = RunChange(expect=(RunState.running,), suspension=suspension, fx=Effects(
        events=[(EventKind.resuspended, event)],
        outbox=[(OutboxKind.approval_card.value, card),
                outbox.card_update(run, approval.token, "superseded", at=now,
                                   actor=approval.decided_by)],
    ))
    moved = await api_calls.move(
        rt.db, run.id, call.call_id, expect=(CallStatus.approved,), now=now, run=change,
        values={"status": CallStatus.pending.value, "token": token,
                "expires_at": suspension.expires_at, "decided_by": None, "decided_at": None,
                "reason": None},
    )
    if moved is None:
        return await _lost(rt, run, call)
    log.info("run %s: call %s changed since approval; asking again", run.id, call.call_id,
             extra={"action": "call_changed", "run_id": run.id, "call_id": call.call_id})
    return ApiRefused(ApiRefusal.changed,
                      f"the preview of call {call.call_id} changed since it was approved; "
                      "a fresh decision was asked for and the call is pending again",
                      {"changes": [c.model_dump(mode="json") for c in changes],
                       "status": CallStatus.pending.value})


async def _blocked(
    rt: Runtime, run: Run, call: ApiCall, approval: Approval, ex: Execution,
) -> ApiRefused:
    now = rt.now()
    code = ex.guard_code or "guard_failed"
    message = ex.guard_message or "a check failed"
    change = RunChange(expect=(RunState.running,), fx=Effects(
        events=[(EventKind.guard_failed, {"call_id": call.call_id, "code": code,
                                          "external": True})],
        outbox=[outbox.card_update(run, approval.token, "guard_failed", at=now,
                                   actor=approval.decided_by, reason=message)],
    ))
    moved = await api_calls.move(
        rt.db, run.id, call.call_id, expect=(CallStatus.approved,), now=now, run=change,
        values={"status": CallStatus.blocked.value, "reason": f"{code}: {message}"},
    )
    if moved is None:
        return await _lost(rt, run, call)
    return ApiRefused(ApiRefusal.blocked, message, {"code": code, "message": message,
                                                    "status": CallStatus.blocked.value})


async def _no_longer_permitted(
    rt: Runtime, run: Run, call: ApiCall, approval: Approval,
) -> ApiRefused:
    now = rt.now()
    detail = f"{run.user_id} may no longer use {call.tool}"
    change = RunChange(
        expect=(RunState.running,),
        values={"state": RunState.halted.value,
                "halt_reason": HaltReason.no_longer_permitted.value},
        fx=Effects(
            events=[(EventKind.halted, {"reason": "no_longer_permitted", "call_id": call.call_id})],
            outbox=[outbox.card_update(run, approval.token, "no_longer_permitted", at=now),
                    outbox.notice(run, "halted", channel=rt.approvals_channel,
                                  reason=HaltReason.no_longer_permitted, detail=detail)],
        ),
    )
    moved = await api_calls.move(
        rt.db, run.id, call.call_id, expect=(CallStatus.approved,), now=now, run=change,
        values={"status": CallStatus.blocked.value, "reason": "no_longer_permitted"},
    )
    if moved is None:
        return await _lost(rt, run, call)
    return ApiRefused(ApiRefusal.no_longer_permitted, detail,
                      {"status": CallStatus.blocked.value, "state": RunState.halted.value})
