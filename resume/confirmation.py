"""Resuming after a person's click: claim first, then re-check against the world as it is now.

``decide`` is quick (a lookup, the approvers policy, one guarded UPDATE) so a
Slack handler can run it right after its ack; ``proceed`` does the slow part
(scope, preview, guards, the tool, the rest of the loop) and is durable: if
the process dies inside it, the reaper takes the run over.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from resume import call_decided, expiry, external, loop, notify
from resume.outcomes import (
    AlreadyResumed,
    CallOutcome,
    Claimed,
    NotAnApprover,
    Refusal,
    Stopped,
    UnknownOrExpired,
)
from resume.runtime import Runtime
from resume.tools import REQUESTER
from store import approvals, claims, runs
from store.effects import Effects
from store.records import Approval, Run
from store.states import RunState

Decision = Literal["approve", "decline"]


async def _may_decide(
    rt: Runtime, token: str, actor: str
) -> tuple[Approval, Run] | Refusal:
    """The request is known, undecided and unexpired, and the approvers policy allows ``actor``."""
    approval = await approvals.get(rt.db, token) if token else None
    if approval is None:
        return UnknownOrExpired("unknown")
    if approval.decided_by is not None and approval.decided_at is not None:
        return AlreadyResumed(approval.decision or "", approval.decided_by, approval.decided_at)
    run = await runs.find(rt.db, approval.run_id)
    if run is None:
        return UnknownOrExpired("unknown")
    if _expired(run, token, rt.now()):
        # Issue 3's order: an expired token is refused as such before who clicked matters.
        # Only a read: the claim's expires_at guard is still the atomic check.
        return UnknownOrExpired("expired")
    tool = rt.app.tool(approval.tool)
    # A tool gone since the card was posted has no policy to widen who may decide.
    policy = tool.approvers if tool is not None else REQUESTER
    if external.is_external(run):
        policy = call_decided.approvers(approval)
    if not policy.allows(actor, run.user_id):
        return NotAnApprover(actor, run.user_id, policy.listed(run.user_id), policy.policy())
    return approval, run


def _expired(run: Run, token: str, now: datetime) -> bool:
    """``token`` expired: due but not yet swept, or swept (the run halted on its expiry)."""
    if run.state is RunState.suspended and run.pending_token == token:
        return run.expires_at is None or run.expires_at <= now
    return run.state is RunState.halted and run.halt_reason == expiry.EXPIRED_REASON


async def refusal(rt: Runtime, token: str, actor: str) -> Refusal | None:
    """Why ``actor`` could not decide ``token`` now; None while a decision would be taken.

    Read-only and quick, for a listener that must know before it asks for more
    (the Decline button, before it opens the reason form). Same checks and
    answers as ``decide``, its claim's guards included; it decides nothing, so
    the later ``decide`` remains the check that counts.
    """
    may = await _may_decide(rt, token, actor)
    if not isinstance(may, tuple):
        return may
    _, run = may
    if run.state is RunState.suspended and run.pending_token == token:
        return None  # open and not expired (_may_decide refused an expired one)
    if run.pending_token != token and run.state in (RunState.suspended, RunState.running):
        return UnknownOrExpired("superseded")
    return UnknownOrExpired("closed")


async def decide(
    rt: Runtime, token: str, decision: Decision, actor: str, reason: str | None = None
) -> Claimed | Refusal:
    """Claim the run for ``actor``'s decision, or say why not. Changes nothing when refused."""
    may = await _may_decide(rt, token, actor)
    if not isinstance(may, tuple):
        return may
    approval, run = may
    now = rt.now()
    status: Literal["approved", "declined"] = "approved" if decision == "approve" else "declined"
    fx = call_decided.merged(Effects(
        events=[("decision", {"decision": decision, "by": actor, "call_id": approval.call_id,
                              "digest": approval.digest, "reason": reason})],
        outbox=[notify.card_update(run, token, status, at=now, actor=actor, reason=reason)],
    ), call_decided.decision_effects(run, approval, decision, actor, reason, now))
    result = await claims.claim(rt.db, token, decision=decision, actor=actor, reason=reason,
                                owner_id=rt.owner_id, now=now, fx=fx)
    if isinstance(result, claims.Claimed):
        return Claimed(result.run, approval.call_id, decision)
    decided = result.approval
    if result.reason == "already_decided" and decided is not None and decided.decided_by:
        assert decided.decided_at is not None
        return AlreadyResumed(decided.decision or "", decided.decided_by, decided.decided_at)
    if result.reason == "expired":
        return UnknownOrExpired("expired")
    if result.reason == "superseded":
        return UnknownOrExpired("superseded")
    if result.reason == "unknown_token":
        return UnknownOrExpired("unknown")
    return UnknownOrExpired("closed")


async def proceed(rt: Runtime, claimed: Claimed) -> CallOutcome:
    """Resume the claimed run; what happened to the decided call."""
    driven = await loop.drive(rt, claimed.run)
    return driven.settled.get(claimed.call_id, Stopped(driven.run))


async def resume_after_confirmation(
    rt: Runtime, token: str, decision: Decision, actor: str, reason: str | None = None
) -> CallOutcome | Refusal:
    """``decide`` then, for the winner, ``proceed``."""
    claimed = await decide(rt, token, decision, actor, reason)
    if not isinstance(claimed, Claimed):
        return claimed
    return await proceed(rt, claimed)
