"""The scheduled jobs of `signoff serve`: expiry, the reaper, the outbox, retention.

One APScheduler ``AsyncIOScheduler`` per process, on the server's event loop:

==========  ======================================  ===================================
job         every                                   does
==========  ======================================  ===================================
expire      SIGNOFF_EXPIRY_INTERVAL_SECONDS          ``resume.expire.expire_suspended``
reap        SIGNOFF_REAPER_INTERVAL_SECONDS (+once   ``resume.reap.recover_orphans``
            at start)
outbox      SIGNOFF_OUTBOX_INTERVAL_SECONDS          ``Notifier.deliver`` (one pass)
purge       SIGNOFF_PURGE_INTERVAL_HOURS             ``resume.purge.purge``
==========  ======================================  ===================================

Every job claims its rows with a guarded UPDATE (or ``SKIP LOCKED``), so any
number of replicas may run the same jobs. ``max_instances=1`` and
``coalesce=True``: a slow pass is never overlapped by the next one, and passes
missed meanwhile collapse into one. A job that fails (the database is down, a
bug) is logged with ``extra={"action": "job_failed", "job": ...}`` and runs
again at its next interval; nothing stops the scheduler.

``start`` also starts the ``Notifier`` loop in kick-only mode and installs
its ``kick`` as ``services.kicker``, so a click's outbox rows go out at once
instead of at the next outbox interval.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from weakref import WeakKeyDictionary

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.notifier import Notifier
from bot.services import Kicker, Services
from resume.runtime import Runtime
from store import errors

log = logging.getLogger(__name__)

#: How long ``stop`` lets jobs in flight finish before cancelling them.
STOP_GRACE_SECONDS = 10.0

Job = Callable[[], Awaitable[object]]


@dataclass
class _Started:
    services: Services
    notifier: Notifier
    #: The ``services.kicker`` that ``start`` replaced, put back by ``stop``.
    previous_kicker: Kicker
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)


_started: WeakKeyDictionary[Any, _Started] = WeakKeyDictionary()


def start(services: Services, *, notifier: Notifier | None = None) -> AsyncIOScheduler:
    """Start the jobs on the running event loop; stop them with ``await stop(scheduler)``.

    ``notifier`` defaults to one built from ``services`` (kick-only: the
    ``outbox`` job is its periodic pass).
    """
    settings, rt = services.settings, services.rt
    notifier = notifier or Notifier.from_settings(rt.db, services.client, settings,
                                                  periodic=False)
    state = _Started(services, notifier, previous_kicker=services.kicker)
    scheduler = AsyncIOScheduler(
        timezone=UTC,
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
    )
    jobs: list[tuple[str, Job, float, bool]] = [
        ("expire", _resume_job(rt, "resume.expire", "expire_suspended"),
         settings.expiry_interval_seconds, False),
        ("reap", _resume_job(rt, "resume.reap", "recover_orphans"),
         settings.reaper_interval_seconds, True),
        ("outbox", notifier.deliver, settings.outbox_interval_seconds, False),
        ("purge", _resume_job(rt, "resume.purge", "purge"),
         settings.purge_interval_hours * 3600, False),
    ]
    for name, job, seconds, at_start in jobs:
        options: dict[str, Any] = {"next_run_time": datetime.now(UTC)} if at_start else {}
        scheduler.add_job(_guarded(state, name, job), "interval", seconds=seconds, id=name,
                          name=name, replace_existing=True, **options)
    scheduler.start()
    _started[scheduler] = state
    services.kicker = notifier.kick
    notifier.start()
    log.info("scheduler started", extra={"action": "scheduler_start", **{
        f"{name}_every_s": seconds for name, _, seconds, _ in jobs}})
    return scheduler


async def stop(scheduler: AsyncIOScheduler, *, grace: float = STOP_GRACE_SECONDS) -> None:
    """Stop scheduling, let jobs in flight finish (up to ``grace`` s), stop the notifier."""
    state = _started.pop(scheduler, None)
    if scheduler.running:
        scheduler.pause()
    if state is not None:
        pending = {t for t in state.in_flight if not t.done()}
        if pending:
            await asyncio.wait(pending, timeout=grace)
    if scheduler.running:
        scheduler.shutdown(wait=False)
        await asyncio.sleep(0)  # AsyncIOScheduler shuts down on the loop's next turn
    if state is not None:
        await state.notifier.stop()
        if state.services.kicker == state.notifier.kick:
            state.services.kicker = state.previous_kicker
    log.info("scheduler stopped", extra={"action": "scheduler_stop"})


def _guarded(state: _Started, name: str, job: Job) -> Callable[[], Awaitable[None]]:
    """``job`` as a scheduled job: tracked for ``stop``, and every failure logged, not raised."""

    async def run() -> None:
        task = asyncio.current_task()
        if task is not None:
            state.in_flight.add(task)
        try:
            await job()
        except errors.DatabaseUnavailable as exc:
            log.warning("job %s skipped: %s; it runs again at its next interval", name, exc,
                        extra={"action": "job_failed", "job": name, "error": str(exc)})
        except Exception as exc:  # the job boundary: log it, keep the scheduler alive
            log.exception("job %s failed; it runs again at its next interval", name,
                          extra={"action": "job_failed", "job": name, "error": repr(exc)})
        finally:
            if task is not None:
                state.in_flight.discard(task)

    run.__name__ = run.__qualname__ = f"signoff_{name}"
    return run


def _resume_job(rt: Runtime, module: str, function: str) -> Job:
    """``module.function(rt)``, imported when the job first runs.

    Imported lazily so that a missing or broken domain module costs that one
    job (logged at every run), not the whole process.
    """

    async def call() -> object:
        target: Callable[[Runtime], Awaitable[object]] = getattr(
            importlib.import_module(module), function)
        return await target(rt)

    return call


def jobs(scheduler: AsyncIOScheduler) -> dict[str, datetime | None]:
    """Job name -> next run time, for the health check and tests."""
    return {job.id: job.next_run_time for job in scheduler.get_jobs()}

