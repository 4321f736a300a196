"""Whole journeys for tests: an entry, then (for the winner) its drive, awaited in place.

Production doors call the entry and spawn ``outcome.drive.go()`` after they
answer; a test usually wants the end of the journey, so these await it.
"""

from __future__ import annotations

import dataclasses

from resume import ask, decide, grant, proceed
from resume.outcomes import (
    CallOutcome,
    Claimed,
    Continued,
    ContinueRefused,
    Decision,
    Refusal,
)
from resume.runtime import Runtime
from store.records import Run


async def begin(rt: Runtime, user_id: str, question: str) -> Run:
    """Ask, and leave the run running, held by ``rt``, undriven (as if the process died)."""
    return (await ask.ask(rt, user_id, question)).run


async def start(rt: Runtime, user_id: str, question: str) -> Run:
    """Ask, then drive the run until it suspends, halts, answers or fails."""
    asked = await ask.ask(rt, user_id, question)
    return (await asked.drive.go()).run


async def resume_after_confirmation(
    rt: Runtime, token: str, decision: Decision, actor: str, reason: str | None = None
) -> CallOutcome | Refusal:
    """Decide then, for the winner, proceed."""
    claimed = await decide.decide(rt, token, decision, actor, reason)
    if not isinstance(claimed, Claimed):
        return claimed
    return await proceed.proceed(claimed)


async def continue_run(rt: Runtime, run_id: str, user: str) -> Continued | ContinueRefused:
    """Grant a continue, then drive the run; ``run`` is where it stopped."""
    granted = await grant.grant_continue(rt, run_id, user)
    if isinstance(granted, ContinueRefused):
        return granted
    driven = await granted.drive.go()
    return dataclasses.replace(granted, run=driven.run)
