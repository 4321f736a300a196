"""The outbox relay: one delivery pass (``deliver_due``) and the loop that runs passes.

Every Slack post or update signoff makes is an outbox row written in the same
transaction as the run transition it reports. ``deliver_due`` leases due rows
one at a time (``store.outbox.pick_due``: one replica per row, rows of a run
in order), sends each with ``bot.outbox.slack_sender``, and settles it:

- sent -> ``mark_sent``;
- 429 -> ``retry_later`` no sooner than Slack's ``Retry-After``;
- 5xx, connection error, timeout -> ``retry_later`` with exponential backoff;
- a permanent Slack error, a payload that cannot be rendered, or the
  ``max_attempts``-th failure -> ``mark_dead`` and an error log with
  ``extra={"action": "outbox_dead", ...}``.

A 429 or transient failure ends the pass (Slack is unwell; the next pass
tries again), and the next pass of a ``Relay`` first probes Slack with a cheap
call (``auth.test``), touching no row while Slack is still unwell. So however
long an outage lasts, it costs a row at most the one attempt that discovered
it, and loses nothing. A database outage mid-delivery loses nothing and posts
nothing twice: the outcome is held in memory and written when the database is
back (``bot.outbox.attempt``).

``Relay`` runs passes in the background: every ``interval`` seconds and as
soon as ``kick()`` is called (after a click, a start, a continue...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import metrics
from bot.config import Settings
from bot.outbox import attempt, failures
from store import errors, outbox
from store.engine import Database

log = logging.getLogger(__name__)

#: How long a picked row is ours. Longer than one delivery can take, client
#: retries (Retry-After sleeps, timeouts) included, so no other replica posts it too.
LEASE = timedelta(minutes=5)
DEFAULT_LIMIT = 50
DEFAULT_MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class DeliveryReport:
    """What one pass did. ``stopped_by`` names the failure that ended it early, if any."""

    sent: int = 0
    retried: int = 0
    dead: int = 0
    stopped_by: str | None = None

    @property
    def picked(self) -> int:
        return self.sent + self.retried + self.dead


async def deliver_due(
    db: Database,
    client: AsyncWebClient,
    *,
    now: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    probe: bool = False,
) -> DeliveryReport:
    """Deliver up to ``limit`` due rows; return what happened.

    ``probe``: first check that Slack answers at all; if it does not, stop
    before leasing any row (use it when the previous pass stopped early).

    Safe to run in any number of processes at once: each row is leased by
    exactly one of them. Raises ``store.errors.DatabaseUnavailable`` when the
    database cannot be reached. A row being delivered then is not lost: its
    outcome is held for up to ``attempt.SETTLE_FOR_SECONDS`` and written when the
    database is back (a row cut off before anything was posted is handed back
    at once); only a longer outage leaves it to be retried after ``LEASE``.
    """
    now = now or datetime.now(UTC)
    if probe and (unwell := await _slack_unwell(client)) is not None:
        return DeliveryReport(stopped_by=f"probe: {unwell}")
    counts = {"sent": 0, "retried": 0, "dead": 0}
    stopped_by = None
    for _ in range(limit):
        picked = await outbox.pick_due(db, now=now, limit=1, lease=LEASE)
        if not picked:
            break
        outcome = await attempt.make(db, client, picked[0], now=now, max_attempts=max_attempts)
        counts[outcome.state] += 1
        if outcome.stop is not None:
            stopped_by = outcome.stop
            break
    metrics.dead_letters(counts["dead"])
    return DeliveryReport(stopped_by=stopped_by, **counts)


async def _slack_unwell(client: AsyncWebClient) -> str | None:
    """None if Slack answers ``auth.test`` (or fails it permanently), else why not."""
    try:
        await client.auth_test()
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        failure = failures.classify(exc)
        if failure.slack_unwell:
            return failure.error
    return None


class Relay:
    """Runs outbox passes in the background: every ``interval`` seconds and on ``kick()``.

    ``interval=None`` delivers on kicks only (use that when the scheduler's
    outbox job provides the periodic pass). At most one pass runs at a time
    in a process; other processes are kept apart by the outbox lease.
    """

    def __init__(
        self,
        db: Database,
        client: AsyncWebClient,
        *,
        interval: float | None = 2.0,
        limit: int = DEFAULT_LIMIT,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.db = db
        self.client = client
        self.interval = interval
        self.limit = limit
        self.max_attempts = max_attempts
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._probe = False

    @classmethod
    def from_settings(
        cls, db: Database, client: AsyncWebClient, settings: Settings, *, periodic: bool = True
    ) -> Relay:
        return cls(
            db, client,
            interval=settings.outbox_interval_seconds if periodic else None,
            max_attempts=settings.outbox_max_attempts,
        )

    def kick(self) -> None:
        """Deliver soon: the loop wakes (a pass in progress is followed by another)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def deliver(self, *, now: datetime | None = None) -> DeliveryReport:
        """One pass, serialised with any other pass of this relay."""
        async with self._lock:
            report = await deliver_due(self.db, self.client, now=now, limit=self.limit,
                                       max_attempts=self.max_attempts, probe=self._probe)
            self._probe = report.stopped_by is not None
        if report.picked >= self.limit and report.stopped_by is None:
            self.kick()  # more may be due: do not wait a whole interval for them
        return report

    async def run(self) -> None:
        """Deliver now, then whenever kicked or ``interval`` passes; until cancelled."""
        while True:
            self._wake.clear()
            await self._pass()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.interval)

    def start(self) -> asyncio.Task[None]:
        """Run ``run()`` as a background task (idempotent); call ``stop()`` at shutdown."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="signoff-outbox-relay")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _pass(self) -> None:
        try:
            await self.deliver()
        except errors.DatabaseUnavailable as exc:
            log.warning("outbox pass skipped: %s", exc,
                        extra={"action": "outbox_pass_failed", "error": str(exc)})
        except Exception:  # the loop's boundary: log it, keep delivering next time
            log.exception("outbox pass failed", extra={"action": "outbox_pass_failed"})
