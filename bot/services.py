"""What the listeners, the outbox relay and the scheduler share: one object per process.

Listeners find it in Bolt's context: ``bot.bolt_app`` installs
:meth:`Services.into_context` as Bolt's one global middleware, and a listener
callback (a module-level function taking ``context``) calls ``Services.of(context)``.

Only the bot's own workspace gets them. The bot token belongs to one workspace,
which Bolt learns from one ``auth.test`` (the authorize result in ``context``).
On every door Bolt serves (HTTP and Socket Mode alike), ``into_context``
compares it with every team and enterprise the request names: ``team.id`` /
``team_id``, ``user.team_id`` (a Slack Connect guest's own team) and
``enterprise.id`` / ``enterprise_id``. On any mismatch it logs
``action: foreign_workspace``, no listener runs, and the sender gets
``403 {"error": "request from another workspace"}``.

Bolt keeps no reference to the tasks it spawns, and neither does
``asyncio.ensure_future``: a task nobody holds may be garbage-collected
mid-flight. The background half of every entry that leaves a run going (ask,
a click, continue) is its outcome's ``drive``, handed to
:meth:`Services.carry_on`, which holds it until it ends. None of that work
needs to survive a crash here: the run is in the store, and the reaper takes
over a run whose heartbeat stops.

That work is bounded: at most ``SIGNOFF_MAX_CONCURRENT_RUNS`` runs are worked
on at once, so a burst of clicks does not fill the event loop with resumed
runs while later clicks wait for their ack. A run waiting for a slot has no
heartbeat yet (its claim, start or continue set one), so it waits at most a
third of ``orphan_after`` and then starts anyway: a bounded wait can never
make a held run look orphaned to a reaper.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from resume.drive import Drive
from resume.runtime import Runtime

log = logging.getLogger(__name__)

#: Installed by the outbox relay: deliver due outbox rows soon (must not block).
Kicker = Callable[[], None]
#: Where :meth:`Services.into_context` puts the services in a request's Bolt context.
CONTEXT_KEY: Final = "services"
FOREIGN_STATUS = 403
FOREIGN_BODY = json.dumps({"error": "request from another workspace"})


def _no_kick() -> None:
    """Until the outbox relay installs its hook, the scheduled outbox job delivers."""


@dataclass
class Services:
    rt: Runtime
    settings: Settings
    client: AsyncWebClient
    #: Background work started after an ack, and listeners in flight: held until done.
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    #: The outbox relay's "deliver the outbox now" hook (see :meth:`kick`).
    kicker: Kicker = _no_kick
    #: Slots for background work (``SIGNOFF_MAX_CONCURRENT_RUNS``).
    _slots: asyncio.Semaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.settings.max_concurrent_runs)

    async def into_context(
        self, body: dict[str, Any], context: AsyncBoltContext,
        next_: Callable[[], Awaitable[BoltResponse]],  # Bolt passes arguments by these names
    ) -> BoltResponse:
        """Bolt global middleware (``app.use(services.into_context)``): a request from the
        bot's own workspace gets these services under ``CONTEXT_KEY``; any other, a 403."""
        authorized = context.authorize_result
        if authorized is not None:  # None: Bolt answers requests needing no authorization
            own = {"team": authorized.team_id, "enterprise": authorized.enterprise_id}
            foreign = [(kind, found) for kind, found in named(body) if found != own[kind]]
            if foreign:
                log.warning("refused a request from another workspace: %s",
                            ", ".join(f"{kind} {found!r}" for kind, found in foreign),
                            extra={"action": "foreign_workspace", "named": dict(foreign),
                                   "own_team": own["team"], "own_enterprise": own["enterprise"]})
                return BoltResponse(status=FOREIGN_STATUS, body=FOREIGN_BODY,
                                    headers={"content-type": "application/json"})
        context[CONTEXT_KEY] = self
        return await next_()

    @staticmethod
    def of(context: AsyncBoltContext) -> Services:
        """The services :meth:`into_context` put in ``context``."""
        found = context.get(CONTEXT_KEY)
        if not isinstance(found, Services):
            raise LookupError(f"no services under {CONTEXT_KEY!r} in this Bolt context: "
                              "build the app with bot.bolt_app.build")
        return found

    def carry_on(self, drive: Drive) -> asyncio.Task[Any]:
        """Carry the run on in the background, the same way for every entry's ``drive``.

        Kicks the outbox relay first (the entry's own rows, a card update or a
        continue notice, go out now) and again when the drive ends. The drive
        waits for a slot; a reference is held until it ends.
        """
        self.kick()
        name = f"drive:{drive.run.id}"
        task = asyncio.get_running_loop().create_task(self._in_slot(drive.go(), name), name=name)
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
    async def tracked(self) -> AsyncIterator[Services]:
        """Hold the current task (a Bolt listener) while it runs, so :meth:`drain` waits for it.

        Enter it *before* ``ack()``: the HTTP response goes out at the ack, and
        whoever reads it may call :meth:`drain` straight away.
        """
        task = asyncio.current_task()
        if task is None:
            yield self
            return
        self.tasks.add(task)
        try:
            yield self
        finally:
            self.tasks.discard(task)

    def kick(self) -> None:
        """Ask the outbox relay to deliver now rather than at its next interval."""
        self.kicker()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no listener or background task is in flight (tests, graceful stop)."""
        async with asyncio.timeout(timeout):
            while pending := self.tasks - {asyncio.current_task()}:
                await asyncio.wait(pending)

    async def close(self) -> None:
        """Dispose of the database pool. Call after :meth:`drain`."""
        await self.rt.db.dispose()


def named(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Every (``team`` | ``enterprise``, id) the request names, as Slack sends them."""
    yield from _ids("team", body.get("team"), body.get("team_id"))
    user = body.get("user")
    if isinstance(user, dict):
        yield from _ids("team", user.get("team_id"))
    yield from _ids("enterprise", body.get("enterprise"), body.get("enterprise_id"))


def _ids(kind: str, *values: Any) -> Iterator[tuple[str, str]]:
    for value in values:
        found = value.get("id") if isinstance(value, dict) else value
        if found not in (None, ""):
            yield kind, str(found)
