"""A person's continue or cancel of their own halted (or suspended) run.

``continue_run`` is never automatic: a halted run stays halted until its
requester continues it. The grant (``rt.grant``: +4 steps, x1.5 spend by
default) raises the limits from where the run stands — what it consumed is
kept, never reset — and is recorded as an event with who asked, the halt
reason it lifts and the old and new limits. Then the run resumes from its
stored messages.

Someone else's run answers ``not_found`` exactly like a missing one, so run
ids leak nothing. Of concurrent continues of one run, one wins; the others
answer ``not_halted`` and grant nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from resume import budget, loop, notify
from resume.runtime import Runtime
from store import claims, runs
from store.effects import Effects
from store.records import Run
from store.states import RunState

log = logging.getLogger(__name__)

GRANT_EVENT = "grant"
CANCELLED_REASON = "cancelled"
#: A concurrent change (an expiry, another continue) between our read and our
#: UPDATE makes us read again; past this many tries the answer is what we see.
_TRIES = 3


@dataclass(frozen=True)
class Continued:
    """The grant was made.

    ``run`` is the running run from ``grant_continue``, or where it stopped from ``continue_run``.
    """

    run: Run
    previous_reason: str | None
    old_limits: dict[str, Any]
    new_limits: dict[str, Any]


@dataclass(frozen=True)
class ContinueRefused:
    reason: Literal["not_found", "not_halted"]


@dataclass(frozen=True)
class Cancelled:
    run: Run


@dataclass(frozen=True)
class CancelRefused:
    #: ``not_cancellable``: the run is running, answered or failed.
    reason: Literal["not_found", "not_cancellable"]


async def continue_run(rt: Runtime, run_id: str, user: str) -> Continued | ContinueRefused:
    """halted -> running with a deliberate grant, for the run's requester; then drive it."""
    granted = await grant_continue(rt, run_id, user)
    if isinstance(granted, ContinueRefused):
        return granted
    driven = await loop.drive(rt, granted.run)
    return Continued(driven.run, granted.previous_reason, granted.old_limits,
                     granted.new_limits)


async def grant_continue(rt: Runtime, run_id: str, user: str) -> Continued | ContinueRefused:
    """halted -> running with a deliberate grant, held by this process; the caller drives it.

    Quick (one guarded UPDATE), so a Slack handler can answer before the run goes on.
    """
    for _ in range(_TRIES):
        current = await runs.find(rt.db, run_id)
        if current is None or current.user_id != user:
            return ContinueRefused("not_found")
        if current.state is not RunState.halted:
            return ContinueRefused("not_halted")
        new_limits = budget.grant(current, rt.grant).model_dump()
        grant = {"by": user, "previous_reason": current.halt_reason,
                 "old_limits": current.limits, "new_limits": new_limits,
                 "consumed": {"steps": current.step, "spend_usd": current.spend_usd,
                              "tool_calls": current.tool_calls,
                              "elapsed_ms": current.elapsed_ms}}
        fx = Effects(
            events=[(GRANT_EVENT, grant)],
            outbox=[notify.notice(current, "continued", channel=rt.approvals_channel,
                                  reason=current.halt_reason, grant=grant)],
        )
        result = await claims.continue_halted(
            rt.db, run_id, user_id=user, owner_id=rt.owner_id, limits=new_limits,
            now=rt.now(), fx=fx, epoch=current.lease_epoch,
        )
        if isinstance(result, Run):
            log.info("run %s continued by %s", run_id, user,
                     extra={"action": "continue", "run_id": run_id})
            return Continued(result, current.halt_reason, current.limits, new_limits)
        if result == "not_found":
            return ContinueRefused("not_found")
    return ContinueRefused("not_halted")


async def cancel(rt: Runtime, run_id: str, user: str) -> Cancelled | CancelRefused:
    """suspended|halted -> failed(cancelled), for the requester; an open card loses its buttons."""
    for _ in range(_TRIES):
        current = await runs.find(rt.db, run_id)
        if current is None or current.user_id != user:
            return CancelRefused("not_found")
        if current.state not in (RunState.suspended, RunState.halted):
            return CancelRefused("not_cancellable")
        now = rt.now()
        detail = f"cancelled by {user}"
        outbox = []
        if current.state is RunState.suspended and current.pending_token is not None:
            outbox.append(notify.card_update(current, current.pending_token, "cancelled",
                                             at=now, actor=user))
        outbox.append(notify.notice(current, "cancelled", channel=rt.approvals_channel,
                                    reason=CANCELLED_REASON, detail=detail))
        fx = Effects(events=[(CANCELLED_REASON, {
            "by": user, "previous_state": current.state.value,
            "previous_reason": current.halt_reason, "token": current.pending_token,
        })], outbox=outbox)
        result = await claims.cancel(rt.db, run_id, user_id=user, now=now, fx=fx,
                                     epoch=current.lease_epoch)
        if isinstance(result, Run):
            log.info("run %s cancelled by %s", run_id, user,
                     extra={"action": "cancel", "run_id": run_id})
            return Cancelled(result)
        if result == "not_found":
            return CancelRefused("not_found")
    return CancelRefused("not_cancellable")
