"""Before and after a decision (a click or a submitted reason), shared by the listeners."""

from __future__ import annotations

import logging

from bot.services import Services
from resume import confirmation, expiry, outcomes
from resume.runtime import Runtime
from store import approvals, runs
from store.states import RunState

log = logging.getLogger(__name__)


async def refusal(rt: Runtime, token: str, actor: str) -> outcomes.Refusal | None:
    """Why ``actor`` could not decide ``token`` now; None while a decision would be taken.

    Read-only and quick (two reads), for the Decline button, which must know
    before it opens the reason form. It asks what ``confirmation.decide`` asks
    before and through its claim, in the same order and with the same answers:
    the request is known and undecided, the tool's approvers policy allows
    ``actor``, and the run still waits on this token, unexpired. It decides
    nothing: state may change while the form is open, so the submission's own
    ``decide`` remains the check that counts.
    """
    approval = await approvals.get(rt.db, token) if token else None
    if approval is None:
        return outcomes.UnknownOrExpired("unknown")
    if approval.decided_by is not None and approval.decided_at is not None:
        return outcomes.AlreadyResumed(approval.decision or "", approval.decided_by,
                                       approval.decided_at)
    run = await runs.find(rt.db, approval.run_id)
    if run is None:
        return outcomes.UnknownOrExpired("unknown")
    tool = rt.app.tool(approval.tool)
    if tool is not None and not tool.approvers.allows(actor, run.user_id):
        return outcomes.NotAnApprover(actor, run.user_id, tool.approvers.listed(run.user_id))
    if run.state is RunState.suspended and run.pending_token == token:
        if run.expires_at is None or run.expires_at <= rt.now():
            return outcomes.UnknownOrExpired("expired")  # the claim's expiry guard would refuse
        return None
    if run.pending_token != token and run.state in (RunState.suspended, RunState.running):
        return outcomes.UnknownOrExpired("superseded")
    if run.halt_reason == expiry.EXPIRED_REASON:
        return outcomes.UnknownOrExpired("expired")
    return outcomes.UnknownOrExpired("closed")


def settle(services: Services, decided: outcomes.Claimed | outcomes.Refusal, user: str) -> None:
    """The winner's run goes on in the background, after the ack; a refusal changed nothing.

    The card update was enqueued by the claim itself; the kick delivers it now.
    """
    if isinstance(decided, outcomes.Claimed):
        log.info("run %s claimed by %s (%s)", decided.run.id, user, decided.decision,
                 extra={"action": "click_won", "run_id": decided.run.id, "user": user})
        services.kick()
        services.spawn(confirmation.proceed(services.rt, decided),
                       name=f"proceed:{decided.run.id}")
    else:
        log.info("decision by %s refused: %s", user, type(decided).__name__,
                 extra={"action": "click_refused", "user": user})
