"""Reap: the clock takes over runs whose holder stopped heartbeating, then carries them on.

A run is an orphan when it is ``running`` and its heartbeat is older than
``rt.orphan_after``: the process holding it died, or hangs. ``recover_orphans``
takes each one over with one guarded UPDATE (state, lease epoch and stale
heartbeat re-checked inside it, the recovery attempt counted in the same
statement, a new lease for this process), then drives it from its stored
messages. The drive reconciles every ``started`` ledger row it meets before
anything else runs, so a crash mid-write never repeats the write.

Concurrent reapers (tasks or replicas) take over each orphan once; the old
holder, if it wakes up, writes nothing (its epoch is stale). A run already
recovered ``rt.max_recovery_attempts`` times is failed ``recovery_exhausted``
with a notice instead: an uncapped reaper is an infinite loop with a database
behind it. A tool call its ledger still shows ``started`` is then never
reconciled, so the notice names each one with its arguments for a person to
check, and the ledger records its outcome as ``unknown``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from resume import call_reap, drive, held
from resume.outcomes import RecoveryReport
from resume.runtime import Runtime
from store import errors, sweeps
from store.events import EventKind
from store.reasons import FailReason
from store.records import Run
from store.transitions import Effects

log = logging.getLogger(__name__)


async def recover_orphans(
    rt: Runtime, now: datetime | None = None, *, limit: int = 50, concurrency: int = 4
) -> RecoveryReport:
    """Take over up to ``limit`` orphans and drive each (at most ``concurrency`` at once)."""
    now = now or rt.now()
    takeovers = await sweeps.take_over_orphans(
        rt.db, now=now, stale_before=now - rt.orphan_after, owner_id=rt.owner_id,
        max_attempts=rt.max_recovery_attempts, limit=limit,
        exhausted_effects=lambda run: _exhausted_effects(rt, run),
        taken_effects=lambda run: _taken_effects(rt, run),
    )
    for run in takeovers.exhausted:
        log.error("run %s failed: recovered %d times already, not again", run.id,
                  run.recovery_attempts,
                  extra={"action": FailReason.recovery_exhausted.value, "run_id": run.id})
    gate = asyncio.Semaphore(max(concurrency, 1))

    async def one(run: Run) -> Run:
        # Heartbeat while queued behind the gate too: a takeover waiting its turn longer
        # than ``orphan_after`` would otherwise look orphaned again, be taken over by
        # another reaper, and soon be failed ``recovery_exhausted`` without ever crashing.
        async with held.keep_alive(rt, run), gate:
            return (await drive.Drive(rt, run).go()).run

    results = await asyncio.gather(*(one(run) for run in takeovers.taken),
                                   return_exceptions=True)
    recovered: list[Run] = []
    interrupted: list[str] = []
    for run, result in zip(takeovers.taken, results, strict=True):
        if isinstance(result, errors.DatabaseUnavailable):
            log.warning("recovery of run %s stopped: %s; the next pass takes it over again",
                        run.id, result, extra={"action": "recover", "run_id": run.id})
            interrupted.append(run.id)
        elif isinstance(result, BaseException):
            raise result
        else:
            recovered.append(result)
    reaped = await call_reap.reap_calls(rt, now)
    return RecoveryReport(recovered, list(takeovers.exhausted), interrupted, reaped)


def _taken_effects(rt: Runtime, before: Run) -> Effects:
    return Effects(events=[(EventKind.recovered, {
        "attempt": before.recovery_attempts + 1,
        "by": rt.owner_id,
        "previous_owner": before.owner_id,
        "last_heartbeat": before.heartbeat_at.isoformat() if before.heartbeat_at else None,
    })])


def _exhausted_effects(rt: Runtime, before: sweeps.Orphan) -> Effects:
    attempts = before.recovery_attempts
    detail = (f"the process working on this run stopped {attempts + 1} times (recovered "
              f"{attempts} times already); it will not be retried.")
    if not before.started:
        detail += " Check the run's trace, then ask again."
    # Nobody will reconcile its started calls now: name them, and record them ``unknown``.
    return held.failure_effects(before, FailReason.recovery_exhausted, detail, before.started,
                                channel=rt.approvals_channel, recovery_attempts=attempts)
