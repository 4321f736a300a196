"""What the listeners, the notifier and the scheduler share: one object per process.

Bolt keeps no reference to the tasks it spawns, and neither does
``asyncio.ensure_future``: a task nobody holds may be garbage-collected
mid-flight. Work started after an ack (an outcome's
``drive.go()``) goes through :meth:`Services.spawn`, which holds it until it
ends. None of that work needs to survive a crash here: the run is in the
store, and the reaper takes over a run whose heartbeat stops.

That work is bounded: at most ``SIGNOFF_MAX_CONCURRENT_RUNS`` runs are worked
on at once, so a burst of clicks does not fill the event loop with resumed
runs while later clicks wait for their ack. A run waiting for a slot has no
heartbeat yet (its claim, start or continue set one), so it waits at most a
third of ``orphan_after`` and then starts anyway: a bounded wait can never
make a held run look orphaned to a reaper.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from resume.runtime import Runtime

log = logging.getLogger(__name__)

#: Installed by the notifier: deliver due outbox rows soon (must not block).
Kicker = Callable[[], None]


def _no_kick() -> None:
    """Until the notifier installs its hook, the scheduled outbox job delivers."""


@dataclass
class Services:
    rt: Runtime
    settings: Settings
    client: AsyncWebClient
    #: Background work started after an ack, and listeners in flight: held until done.
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    #: The notifier's "deliver the outbox now" hook (see :meth:`kick`).
    kicker: Kicker = _no_kick
    #: Slots for background work (``SIGNOFF_MAX_CONCURRENT_RUNS``).
    _slots: asyncio.Semaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.settings.max_concurrent_runs)

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``work`` in the background when a slot is free, holding a reference until it
        ends; kick after. ``work`` is a run this process holds (a drive or a resume)."""
        task = asyncio.get_running_loop().create_task(self._in_slot(work, name), name=name)
        self.tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    async def _in_slot(self, work: Coroutine[Any, Any, Any], name: str) -> Any:
        try:
            slotted = await self._wait_for_slot(name)
        except BaseException:
            work.close()  # cancelled while queued: it never started
            raise
        try:
            return await work
        finally:
            if slotted:
                self._slots.release()

    async def _wait_for_slot(self, name: str) -> bool:
        """True with a slot; False when the wait hit its bound (start anyway, unslotted)."""
        patience = self.rt.orphan_after.total_seconds() / 3
        try:
            await asyncio.wait_for(self._slots.acquire(), patience)
        except TimeoutError:
            log.warning("%s waited %.0fs for a slot; starting it anyway so its lease stays "
                        "fresh (raise SIGNOFF_MAX_CONCURRENT_RUNS if this repeats)",
                        name, patience, extra={"action": "slot_wait_exceeded", "task": name})
            return False
        return True

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # The run is durable: the reaper takes over one whose worker died here.
            log.error("background task %s failed; the reaper will take the run over",
                      task.get_name(), exc_info=exc,
                      extra={"action": "background_failed", "task": task.get_name()})
        self.kick()

    @asynccontextmanager
    async def tracked(self) -> AsyncIterator[None]:
        """Hold the current task (a Bolt listener) while it runs, so :meth:`drain` waits for it.

        Enter it *before* ``ack()``: the HTTP response goes out at the ack, and
        whoever reads it may call :meth:`drain` straight away.
        """
        task = asyncio.current_task()
        if task is None:
            yield
            return
        self.tasks.add(task)
        try:
            yield
        finally:
            self.tasks.discard(task)

    def kick(self) -> None:
        """Ask the notifier to deliver the outbox now rather than at its next interval."""
        self.kicker()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no listener or background task is in flight (tests, graceful stop)."""
        async with asyncio.timeout(timeout):
            while pending := self.tasks - {asyncio.current_task()}:
                await asyncio.wait(pending)

    async def close(self) -> None:
        """Dispose of the database pool. Call after :meth:`drain`."""
        await self.rt.db.dispose()
