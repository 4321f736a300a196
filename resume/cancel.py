"""Cancel: a person stops their own suspended or halted run for good.

The run fails ``cancelled``; an open approval card loses its buttons in the
same transaction. Someone else's run answers ``not_found`` exactly like a
missing one. Of a cancel racing a click, a continue or an expiry, one wins.
"""

from __future__ import annotations

import logging

from resume import call_decided, outbox
from resume.grant import TRIES
from resume.outcomes import Cancelled, CancelRefused
from resume.runtime import Runtime
from store import claims, runs
from store.events import EventKind
from store.reasons import FailReason, RefusalReason
from store.records import Run
from store.states import RunState
from store.transitions import Effects

log = logging.getLogger(__name__)


async def cancel(rt: Runtime, run_id: str, user: str) -> Cancelled | CancelRefused:
    """suspended|halted -> failed(cancelled), for the requester; an open card loses its buttons."""
    for _ in range(TRIES):
        current = await runs.find(rt.db, run_id)
        if current is None or current.user_id != user:
            return CancelRefused(RefusalReason.not_found)
        if current.state not in (RunState.suspended, RunState.halted):
            return CancelRefused(RefusalReason.not_cancellable)
        now = rt.now()
        detail = f"cancelled by {user}"
        rows = []
        if current.state is RunState.suspended and current.pending_token is not None:
            rows.append(outbox.card_update(current, current.pending_token, "cancelled",
                                           at=now, actor=user))
        rows.append(outbox.notice(current, "cancelled", channel=rt.approvals_channel,
                                  reason=FailReason.cancelled, detail=detail))
        fx = call_decided.merged(Effects(events=[(EventKind.cancelled, {
            "by": user, "previous_state": current.state.value,
            "previous_reason": current.halt_reason, "token": current.pending_token,
        })], outbox=rows), call_decided.cancel_effects(current, now))
        result = await claims.cancel(rt.db, run_id, user_id=user, now=now, fx=fx,
                                     epoch=current.lease_epoch)
        if isinstance(result, Run):
            log.info("run %s cancelled by %s", run_id, user,
                     extra={"action": "cancel", "run_id": run_id})
            return Cancelled(result)
        if result is RefusalReason.not_found:
            return CancelRefused(RefusalReason.not_found)
    return CancelRefused(RefusalReason.not_cancellable)
