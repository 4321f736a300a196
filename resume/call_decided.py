"""What a click and the expiry sweep do besides the run when the call is an external one.

The click is the same entry (``confirmation.decide``) and the same claim for
hosted and external runs; for an external call the decision is written to
the call in the claim's own transaction, and the run is not driven here: its
agent reads the decision through the API (and its webhook).
"""

from __future__ import annotations

from datetime import datetime

from resume import external
from resume.tools import REQUESTER, Approvers
from store.reasons import FailReason
from store.records import Approval, Run
from store.states import CallStatus, RunState
from store.transitions import CallChange, Effects


def approvers(approval: Approval) -> Approvers:
    """Who may decide an external call: the users its request named, else the requester."""
    named = approval.card.get("approvers") or ()
    return Approvers(users=tuple(str(u) for u in named)) if named else REQUESTER


def decision_effects(
    run: Run, approval: Approval, decision: str, actor: str, reason: str | None, now: datetime,
) -> Effects:
    """The call's decision, and its webhook, for the claim's transaction (external runs)."""
    if not run.external:
        return Effects()
    status = CallStatus.approved if decision == "approve" else CallStatus.declined
    values = {"status": status.value, "decided_by": actor, "decided_at": now, "reason": reason}
    data = {"run_id": run.id, "call_id": approval.call_id, "tool": approval.tool,
            "status": status.value,
            "decision": {"by": actor, "at": now.isoformat(), "reason": reason}}
    return Effects(calls=[CallChange(approval.call_id, values)],
                   outbox=external.webhook_rows(run, "call.decided", data, at=now))


def expiry_effects(before: Run, now: datetime) -> Effects:
    """An external run's pending call expires with its card."""
    call_id = (before.pending or {}).get("call_id")
    if not before.external or not isinstance(call_id, str):
        return Effects()
    data = {"run_id": before.id, "call_id": call_id,
            "tool": (before.pending or {}).get("tool"), "status": CallStatus.expired.value,
            "decision": None}
    return Effects(calls=[CallChange(call_id, {"status": CallStatus.expired.value})],
                   outbox=external.webhook_rows(before, "call.expired", data, at=now))


def cancel_effects(before: Run, now: datetime) -> Effects:
    """An external run cancelled in Slack: its pending call is cancelled, its key told."""
    if not before.external:
        return Effects()
    call_id = (before.pending or {}).get("call_id")
    changes = ([CallChange(call_id, {"status": CallStatus.cancelled.value})]
               if before.state is RunState.suspended and isinstance(call_id, str) else [])
    final = {"run_id": before.id, "state": RunState.failed.value,
             "reason": FailReason.cancelled.value, "answer": None}
    return Effects(calls=changes,
                   outbox=external.webhook_rows(before, "run.finished", final, at=now))


def merged(*parts: Effects) -> Effects:
    """One Effects with every part's rows, in order."""
    out = Effects()
    for part in parts:
        out.messages += part.messages
        out.events += part.events
        out.outbox += part.outbox
        out.ledger += part.ledger
        out.calls += part.calls
    return out

