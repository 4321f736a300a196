"""Entry: an external agent asks for approval of one call (``POST .../calls``).

The run suspends and the same approval card as a hosted run's is posted (the
same outbox payload, the same approvers policy words, the same expiry). The
same ``call_id`` again returns the same call; with another body it is refused.
Past a budget bound the run halts instead, as a hosted run does.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from resume import external, outbox
from resume.outbox import ApprovalCard, OutboxKind
from resume.outcomes import ApiRefusal, ApiRefused, CallState
from resume.runtime import Runtime
from resume.tools import Preview
from store import api_calls, errors, runs
from store.api_calls import NewCall, RunChange
from store.api_records import ApiCall, ApiKey
from store.events import EventKind
from store.records import Run
from store.runs import Suspension
from store.states import RunState
from store.transitions import Effects

log = logging.getLogger(__name__)

#: The longest a card may wait: the window bounds how stale an approval may be.
MAX_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class CallRequest:
    call_id: str
    tool: str
    args: dict[str, Any]
    preview: Preview
    approvers: tuple[str, ...] = ()
    ttl: timedelta | None = None
    spend_usd: float = 0.0
    #: A digest of the request body: the same call id with another body is refused.
    request_digest: str = ""


async def request_call(
    rt: Runtime, key: ApiKey, run_id: str, req: CallRequest
) -> CallState | ApiRefused:
    owned = await external.owned_run(rt, key, run_id)
    if isinstance(owned, ApiRefused):
        return owned
    run, _ = owned
    if not external.allows_tool(key, req.tool):
        return ApiRefused(ApiRefusal.tool_not_allowed,
                          f"key {key.name!r} may not call {req.tool!r} (its tools: "
                          f"{', '.join(key.tools)})")
    existing = await api_calls.get(rt.db, run_id, req.call_id)
    if existing is not None:
        return _same_call(existing, run, req)
    if run.state is not RunState.running:
        return _not_running(run)
    bound = external.budget_bound(run, req.spend_usd)
    if bound is not None:
        return await external.halt_for_budget(rt, run, bound)
    try:
        change = _suspension(rt, run, req)
        done = await api_calls.request(
            rt.db, run_id, NewCall(req.call_id, req.tool, req.args, req.request_digest,
                                   req.spend_usd), change, now=rt.now())
    except (errors.PayloadTooLarge, errors.NotSerializable) as exc:
        return ApiRefused(ApiRefusal.invalid, str(exc))
    if done is None:  # a concurrent request: the same call id, or another call first
        again = await api_calls.get(rt.db, run_id, req.call_id)
        current = await runs.get(rt.db, run_id)
        return _same_call(again, current, req) if again is not None else _not_running(current)
    call, suspended = done
    log.info("run %s: call %s (%s) waits for approval", run_id, req.call_id, req.tool,
             extra={"action": "call_requested", "run_id": run_id, "call_id": req.call_id})
    return CallState(call, suspended, created=True)


def _same_call(call: ApiCall, run: Run, req: CallRequest) -> CallState | ApiRefused:
    if call.request_digest != req.request_digest:
        return ApiRefused(ApiRefusal.idempotency_conflict,
                          f"call {req.call_id!r} was requested before with another body; "
                          "use a new call_id for a new call")
    return CallState(call, run)


def _not_running(run: Run) -> ApiRefused:
    why = f" ({run.halt_reason})" if run.halt_reason else ""
    return ApiRefused(ApiRefusal.run_not_running,
                      f"run {run.id} is {run.state.value}{why}; it takes no new call now",
                      {"state": run.state.value, "reason": run.halt_reason})


def _suspension(rt: Runtime, run: Run, req: CallRequest) -> RunChange:
    now = rt.now()
    ttl = min(req.ttl or rt.suspension_ttl, MAX_TTL)
    token = secrets.token_urlsafe(24)
    card = ApprovalCard(
        run_id=run.id, token=token, requester=run.user_id, question=run.question,
        tool=req.tool, preview=req.preview.data(), budget=outbox.budget_data(run),
        expires_at=(now + ttl).timestamp(), approvers=list(req.approvers) or None,
        channel=rt.approvals_channel,
    ).model_dump(mode="json")
    suspension = Suspension(
        call_id=req.call_id, tool=req.tool,
        pending={"call_id": req.call_id, "tool": req.tool, "args": req.args},
        preview=req.preview.model_dump(mode="json"), digest=req.preview.digest(), token=token,
        expires_at=now + ttl, card=card,
    )
    event = {"call_id": req.call_id, "tool": req.tool, "digest": req.preview.digest(),
             "expires_at": suspension.expires_at.isoformat(), "external": True}
    return RunChange(expect=(RunState.running,), suspension=suspension,
                     fx=Effects(events=[(EventKind.suspended, event)],
                                outbox=[(OutboxKind.approval_card.value, card)]))
