"""Continue: a person's deliberate grant of more budget to their own halted run.

A continue is never automatic: a halted run stays halted until its
requester continues it. The grant (``rt.grant``: +4 steps, x1.5 spend by
default) raises the limits from where the run stands — what it consumed is
kept, never reset — and is recorded as an event with who asked, the halt
reason it lifts and the old and new limits. ``Continued.drive`` then carries
the run on from its stored messages.

Someone else's run answers ``not_found`` exactly like a missing one, so run
ids leak nothing. Of concurrent continues of one run, one wins; the others
answer ``not_halted`` and grant nothing.
"""

from __future__ import annotations

import logging

from resume import budget, outbox
from resume.drive import Drive
from resume.outcomes import Continued, ContinueRefused
from resume.runtime import Runtime
from store import claims, runs
from store.events import EventKind
from store.reasons import RefusalReason
from store.records import Run
from store.states import RunState
from store.transitions import Effects

log = logging.getLogger(__name__)

#: A concurrent change (an expiry, another continue) between our read and our
#: UPDATE makes us read again; past this many tries the answer is what we see.
TRIES = 3


async def grant_continue(rt: Runtime, run_id: str, user: str) -> Continued | ContinueRefused:
    """halted -> running with a deliberate grant, held by this process; ``drive`` carries it on.

    Quick (one guarded UPDATE), so a Slack handler can answer before the run goes on.
    """
    for _ in range(TRIES):
        current = await runs.find(rt.db, run_id)
        if current is None or current.user_id != user:
            return ContinueRefused(RefusalReason.not_found)
        if current.state is not RunState.halted:
            return ContinueRefused(RefusalReason.not_halted)
        new_limits = budget.grant(current, rt.grant).model_dump()
        grant = {"by": user, "previous_reason": current.halt_reason,
                 "old_limits": current.limits, "new_limits": new_limits,
                 "consumed": {"steps": current.step, "spend_usd": current.spend_usd,
                              "tool_calls": current.tool_calls,
                              "elapsed_ms": current.elapsed_ms}}
        fx = Effects(
            events=[(EventKind.grant, grant)],
            outbox=[outbox.notice(current, "continued", channel=rt.approvals_channel,
                                  reason=current.halt_reason, grant=grant)],
        )
        result = await claims.continue_halted(
            rt.db, run_id, user_id=user, owner_id=rt.owner_id, limits=new_limits,
            now=rt.now(), fx=fx, epoch=current.lease_epoch,
        )
        if isinstance(result, Run):
            log.info("run %s continued by %s", run_id, user,
                     extra={"action": "continue", "run_id": run_id})
            return Continued(result, current.halt_reason, current.limits, new_limits,
                             Drive(rt, result))
        if result is RefusalReason.not_found:
            return ContinueRefused(RefusalReason.not_found)
    return ContinueRefused(RefusalReason.not_halted)
