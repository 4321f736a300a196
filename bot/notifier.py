"""Delivering the outbox to Slack: one pass (``deliver_due``) and the loop that runs it.

Every Slack post or update signoff makes is an outbox row written in the same
transaction as the run transition it reports. ``deliver_due`` leases due rows
one at a time (``store.outbox.pick_due``: one replica per row, rows of a run
in order), sends each with ``bot.delivery``, and settles it:

- sent -> ``mark_sent``;
- 429 -> ``retry_later`` no sooner than Slack's ``Retry-After``;
- 5xx, connection error, timeout -> ``retry_later`` with exponential backoff;
- a permanent Slack error, a payload that cannot be rendered, or the
  ``max_attempts``-th failure -> ``mark_dead`` and an error log with
  ``extra={"action": "outbox_dead", ...}``.

A 429 or transient failure ends the pass (Slack is unwell; the next pass
tries again). Rows are leased one at a time, so a row's attempt count only
grows when it is actually tried. With ``probe=True`` a pass first makes a
cheap call (``auth.test``) and touches no row if Slack is still unwell;
``Notifier`` probes after every pass that ended that way. So however long
an outage lasts, it costs a row at most the one attempt that discovered it:
``max_attempts`` bounds rows that fail while Slack is otherwise answering,
and an outage loses nothing.

A database outage mid-delivery loses nothing and posts nothing twice: the
outcome is held in memory and written when the database is back (``_settle``).

``Notifier`` runs passes in the background: every ``interval`` seconds and
as soon as ``kick()`` is called (after a click, a start, a continue...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
from pydantic import ValidationError
from slack_sdk.errors import SlackClientError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bot import delivery, delivery_errors, metrics
from bot.cards import CardTooLarge
from bot.config import Settings
from store import errors, outage, outbox
from store.engine import Database
from store.records import OutboxRow

log = logging.getLogger(__name__)

#: How long a picked row is ours. Longer than one delivery can take, client
#: retries (Retry-After sleeps, timeouts) included, so no other replica posts it too.
LEASE = timedelta(minutes=5)
#: How long a delivery's outcome is held while the database is away; past that the
#: row waits out its lease (a longer outage is an incident; nothing is lost either way).
SETTLE_FOR_SECONDS = delivery.REMEMBER_FOR_SECONDS
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


@dataclass(frozen=True)
class _Outcome:
    state: str  # "sent" | "retried" | "dead"
    stop: str | None = None


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
    outcome is held for up to ``SETTLE_FOR_SECONDS`` and written when the
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
        outcome = await _deliver_one(db, client, picked[0], now=now, max_attempts=max_attempts)
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
        failure = delivery_errors.classify(exc)
        if failure.slack_unwell:
            return failure.error
    return None


async def _deliver_one(
    db: Database, client: AsyncWebClient, row: OutboxRow, *, now: datetime, max_attempts: int
) -> _Outcome:
    try:
        sent = await delivery.send(db, client, row)
    except delivery.Wait as wait:
        return await _retry(db, row, at=now + timedelta(seconds=wait.seconds),
                            error=wait.reason, max_attempts=max_attempts)
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        failure = delivery_errors.classify(exc)
        if failure.kind == "permanent":
            return await _dead(db, row, failure.error)
        if failure.retry_after is not None:
            delay = failure.retry_after
        else:
            delay = delivery_errors.backoff(row.attempts)
        outcome = await _retry(db, row, at=now + timedelta(seconds=delay), error=failure.error,
                               max_attempts=max_attempts)
        return _Outcome(outcome.state, stop=failure.error)
    except (delivery.Undeliverable, ValidationError, CardTooLarge,
            SlackObjectFormationError) as exc:
        return await _dead(db, row, f"{type(exc).__name__}: {exc}")
    except delivery.PostedUnrecorded:
        raise  # in Slack, not in the store: the lease holds off a second post a while longer
    except errors.DatabaseUnavailable as exc:
        # Nothing was posted: hand the row back now, not after the lease (and never
        # count an outage of ours towards the row's death).
        error = f"database unavailable: {exc}"
        await _settle(row, "handing back", lambda: outbox.retry_later(
            db, row.id, at=now, error=error, attempts=row.attempts))
        raise
    await _settle(row, "marking sent",
                  lambda: outbox.mark_sent(db, row.id, now=now, attempts=row.attempts))
    log.info(
        "outbox row %s (%s, run %s) delivered%s", row.id, row.kind, row.run_id,
        f": {sent.note}" if sent.note else "",
        extra={"action": "outbox_sent", "outbox_id": row.id, "run_id": row.run_id,
               "kind": row.kind, "attempts": row.attempts, "channel": sent.channel,
               "ts": sent.ts, "note": sent.note},
    )
    return _Outcome("sent")


async def _retry(
    db: Database, row: OutboxRow, *, at: datetime, error: str, max_attempts: int
) -> _Outcome:
    if row.attempts >= max_attempts:
        return await _dead(db, row, f"gave up after {row.attempts} attempts; last: {error}")
    await _settle(row, "scheduling a retry of", lambda: outbox.retry_later(
        db, row.id, at=at, error=error, attempts=row.attempts))
    log.warning(
        "outbox row %s (%s, run %s) not delivered (attempt %s of %s): %s; next try at %s",
        row.id, row.kind, row.run_id, row.attempts, max_attempts, error, at.isoformat(),
        extra={"action": "outbox_retry", "outbox_id": row.id, "run_id": row.run_id,
               "kind": row.kind, "attempts": row.attempts, "error": error,
               "next_attempt_at": at.isoformat()},
    )
    return _Outcome("retried")


async def _dead(db: Database, row: OutboxRow, error: str) -> _Outcome:
    await _settle(row, "marking dead",
                  lambda: outbox.mark_dead(db, row.id, error=error, attempts=row.attempts))
    log.error(
        "outbox row %s (%s, run %s) is dead after %s attempt(s): %s; nobody was told. "
        "Fix the cause, then re-post by hand (`signoff runs show %s` has the details)",
        row.id, row.kind, row.run_id, row.attempts, error, row.run_id,
        extra={"action": "outbox_dead", "outbox_id": row.id, "run_id": row.run_id,
               "kind": row.kind, "attempts": row.attempts, "error": error},
    )
    return _Outcome("dead")


async def _settle(row: OutboxRow, what: str, mark: Callable[[], Awaitable[bool]]) -> None:
    """Write a row's outcome, holding it through a short database outage.

    Until it is written only this process knows it; lost, the row would wait out
    its lease and then be tried again (a "sent" row posted twice). The marks are
    fenced by ``attempts``, so a retry after a commit whose answer was lost is a no-op.
    """
    await outage.hold(lambda _attempt: mark(), seconds=SETTLE_FOR_SECONDS, run_id=row.run_id,
                      what=f"{what} outbox row {row.id}")


class Notifier:
    """Runs delivery passes in the background: every ``interval`` seconds and on ``kick()``.

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
    ) -> Notifier:
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
        """One pass, serialised with any other pass of this notifier."""
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
            self._task = asyncio.create_task(self.run(), name="signoff-notifier")
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
