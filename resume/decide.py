"""Decide: a person's click (approve or decline) claims the suspended run, or is refused.

``decide`` is quick (a lookup, the approvers policy, one guarded UPDATE) so a
Slack handler can run it right after its ack; the winner's ``Claimed.drive``
does the slow part (``resume.proceed``): scope, preview, guards, the tool, the
rest of the drive. ``refusal`` answers the same checks without deciding.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from resume import call_decided, outbox
from resume.drive import Drive
from resume.outcomes import (
    AlreadyResumed,
    Claimed,
    Decision,
    NotAnApprover,
    Refusal,
    UnknownOrExpired,
)
from resume.runtime import Runtime
from resume.tools import REQUESTER, Approvers
from store import claims, runs
from store.events import EventKind
from store.reasons import HaltReason, RefusalReason
from store.records import Approval, Run
from store.states import RunState
from store.transitions import Effects


async def _may_decide(
    rt: Runtime, token: str, actor: str, team_id: str | None
) -> tuple[Approval, Run] | Refusal:
    """The request is known, undecided and unexpired, and the approvers policy allows ``actor``."""
    approval = await claims.approval(rt.db, token) if token else None
    if approval is None:
        return UnknownOrExpired(RefusalReason.unknown)
    if approval.decided_by is not None and approval.decided_at is not None:
        return AlreadyResumed(approval.decision or "", approval.decided_by, approval.decided_at)
    run = await runs.find(rt.db, approval.run_id)
    if run is None:
        return UnknownOrExpired(RefusalReason.unknown)
    if _expired(run, token, rt.now()):
        # An expired token is refused as such before who clicked matters (the reply
        # should not send an approver looking for a card that is gone anyway).
        # Only a read: the claim's expires_at guard is still the atomic check.
        return UnknownOrExpired(RefusalReason.expired)
    policy = call_decided.approvers(approval) if run.external else _hosted_policy(rt, approval)
    if not policy.allows(actor, run.user_id, team_id):
        return NotAnApprover(actor, run.user_id, policy.listed(run.user_id), policy.policy())
    return approval, run


def _hosted_policy(rt: Runtime, approval: Approval) -> Approvers:
    tool = rt.app.tool(approval.tool)
    # A tool gone since the card was posted has no policy to widen who may decide.
    return tool.approvers if tool is not None else REQUESTER


def _expired(run: Run, token: str, now: datetime) -> bool:
    """``token`` expired: due but not yet swept, or swept (the run halted on its expiry)."""
    if run.state is RunState.suspended and run.pending_token == token:
        return run.expires_at is None or run.expires_at <= now
    return run.state is RunState.halted and run.halt_reason == HaltReason.suspension_expired


async def refusal(
    rt: Runtime, token: str, actor: str, *, team_id: str | None = None
) -> Refusal | None:
    """Why ``actor`` could not decide ``token`` now; None while a decision would be taken.

    Read-only and quick, for a listener that must know before it asks for more
    (the Decline button, before it opens the reason form). Same checks and
    answers as ``decide``, its claim's guards included; it decides nothing, so
    the later ``decide`` remains the check that counts.
    """
    may = await _may_decide(rt, token, actor, team_id)
    if not isinstance(may, tuple):
        return may
    _, run = may
    if run.state is RunState.suspended and run.pending_token == token:
        return None  # open and not expired (_may_decide refused an expired one)
    if run.pending_token != token and run.state in (RunState.suspended, RunState.running):
        return UnknownOrExpired(RefusalReason.superseded)
    return UnknownOrExpired(RefusalReason.closed)


async def decide(
    rt: Runtime, token: str, decision: Decision, actor: str, reason: str | None = None,
    *, team_id: str | None = None,
) -> Claimed | Refusal:
    """Claim the run for ``actor``'s decision, or say why not. Changes nothing when refused.

    ``team_id`` is the clicker's own workspace, for an approvers predicate.
    """
    may = await _may_decide(rt, token, actor, team_id)
    if not isinstance(may, tuple):
        return may
    approval, run = may
    now = rt.now()
    status: Literal["approved", "declined"] = "approved" if decision == "approve" else "declined"
    fx = Effects(
        events=[(EventKind.decision, {"decision": decision, "by": actor,
                                      "call_id": approval.call_id, "digest": approval.digest,
                                      "reason": reason})],
        outbox=[outbox.card_update(run, token, status, at=now, actor=actor, reason=reason)],
    )
    if run.external:  # the call's own row and its webhook move in the claim's transaction
        fx = call_decided.merged(
            fx, call_decided.decision_effects(run, approval, decision, actor, reason, now))
    result = await claims.claim(rt.db, token, decision=decision, actor=actor, reason=reason,
                                owner_id=rt.owner_id, now=now, fx=fx)
    if isinstance(result, claims.ClaimWon):
        return Claimed(result.run, approval.call_id, decision, Drive(rt, result.run),
                       waited=now - result.approval.created_at)
    decided = result.approval
    if result.reason is RefusalReason.already_decided and decided is not None \
            and decided.decided_by:
        assert decided.decided_at is not None
        return AlreadyResumed(decided.decision or "", decided.decided_by, decided.decided_at)
    if result.reason is RefusalReason.already_decided:
        return UnknownOrExpired(RefusalReason.closed)
    return UnknownOrExpired(result.reason)
