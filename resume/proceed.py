"""Proceed: carry a claimed run on, and say what became of the decided call.

Slow and durable: scope re-resolved, preview digest and guards re-checked
against the world as it is now, then the tool, then the rest of the drive. If
the process dies inside it, the reaper takes the run over.
"""

from __future__ import annotations

from resume.outcomes import CallOutcome, Claimed


async def proceed(claimed: Claimed) -> CallOutcome:
    """Drive the claimed run; what happened to the decided call (Stopped if it never settled)."""
    driven = await claimed.drive.go()
    return driven.outcome_of(claimed.call_id)
