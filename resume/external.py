"""What the API's entries share: the key's view of its runs and calls, and webhook rows."""

from __future__ import annotations

import fnmatch
import secrets
from datetime import datetime
from typing import Any

from resume import budget, outbox
from resume.outbox import OutboxKind, WebhookEvent, WebhookType
from resume.outcomes import ApiRefusal, ApiRefused
from resume.runtime import Runtime
from store import api_runs
from store.api_records import ApiCall, ApiKey, ApiRun
from store.events import EventKind
from store.reasons import HaltReason
from store.records import Run
from store.states import RunState
from store.transitions import Effects

Row = outbox.Row

def allows_tool(key: ApiKey, tool: str) -> bool:
    """The key's globs cover ``tool`` (``refund_*``, ``*``)."""
    return any(fnmatch.fnmatchcase(tool, glob) for glob in key.tools)


def idempotency_key(run_id: str, call_id: str) -> str:
    """The ledger's key for the call: the same for a hosted and an external call."""
    return f"{run_id}:{call_id}"


def run_not_found(run_id: str) -> ApiRefused:
    return ApiRefused(ApiRefusal.not_found, f"no run {run_id!r} for this key")


def call_not_found(run_id: str, call_id: str) -> ApiRefused:
    return ApiRefused(ApiRefusal.not_found, f"no call {call_id!r} in run {run_id!r}")


async def owned_run(
    rt: Runtime, key: ApiKey, run_id: str, *, external: bool = True
) -> tuple[Run, ApiRun] | ApiRefused:
    """The key's run (an external one unless ``external`` is False), or not_found."""
    found = await api_runs.owned(rt.db, run_id, key.id)
    if found is None or (external and not found[1].external):
        return run_not_found(run_id)
    return found


def call_data(call: ApiCall, run: Run) -> dict[str, Any]:
    """A call as webhooks and the API show it."""
    decision = None
    if call.decided_by is not None and call.decided_at is not None:
        decision = {"by": call.decided_by, "at": call.decided_at.isoformat(),
                    "reason": call.reason}
    return {"run_id": run.id, "call_id": call.call_id, "tool": call.tool,
            "status": call.status.value, "decision": decision}


def webhook_rows(run: Run, kind: WebhookType, data: dict[str, Any], *, at: datetime) -> list[Row]:
    """The outbox row for ``kind`` if ``run`` is external (the sender finds its key's URL;
    a key without a webhook drops the row there)."""
    if not run.external:
        return []
    event = WebhookEvent(id=f"msg_{secrets.token_hex(12)}", run_id=run.id, type=kind,
                         timestamp=at.timestamp(), data=data)
    return [(OutboxKind.webhook.value, event.model_dump(mode="json"))]


def budget_bound(run: Run, spend_usd: float) -> HaltReason | None:
    """The bound one more call of ``spend_usd`` would pass, or None."""
    bound = budget.exceeded_before_tool(run)
    if bound is None and run.spend_usd + spend_usd > budget.limits_of(run).max_spend_usd:
        bound = HaltReason.budget_spend
    return bound


async def halt_for_budget(rt: Runtime, run: Run, bound: HaltReason) -> ApiRefused:
    """running -> halted(bound), the requester told how to continue; the refusal to answer."""
    detail = (f"run {run.id} reached its {bound.removeprefix('budget:')} limit; continue it "
              f"with `/signoff continue {run.id}` to grant more")
    fx = Effects(events=[(EventKind.halted, {"reason": bound.value})],
                 outbox=[outbox.notice(run, "halted", channel=rt.approvals_channel,
                                       reason=bound, detail=detail)])
    await api_runs.move(rt.db, run.id, expect=(RunState.running,),
                        values={"state": RunState.halted.value, "halt_reason": bound},
                        now=rt.now(), fx=fx, action="halt")
    return ApiRefused(ApiRefusal.budget_exceeded, detail, {"reason": bound})
