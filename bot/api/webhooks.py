"""Delivering webhook rows of the outbox: signed per Standard Webhooks, with retries.

Webhook rows are the outbox's own queue (``pick_due(webhooks=True)``), so a
receiver that is down never holds up Slack. Each row is signed with the
key's secret (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``
by the ``standardwebhooks`` library) and POSTed; a 2xx marks it sent,
anything else retries with exponential backoff (capped at five minutes) up
to ``MAX_ATTEMPTS``, so a receiver down for a while gets every event once
it is back. The ``webhook-id`` is the same on every attempt, so a receiver
can drop a repeat (delivery is at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import UTC, datetime, timedelta

import httpx
from standardwebhooks import Webhook

from bot.outbox import failures
from resume.outbox import WebhookEvent
from store import api_keys, api_runs, errors, outbox
from store.engine import Database
from store.records import OutboxRow

log = logging.getLogger(__name__)

#: Seconds between passes when nothing kicks the sender.
INTERVAL_SECONDS = 1.0
#: Attempts before a row is given up (dead); with the backoff, well over an hour.
MAX_ATTEMPTS = 20
TIMEOUT_SECONDS = 10.0
LEASE = timedelta(seconds=60)


async def deliver_due(db: Database, http: httpx.AsyncClient, *, limit: int = 20) -> int:
    """One pass: deliver up to ``limit`` due webhook rows; how many were sent."""
    sent = 0
    for _ in range(limit):
        now = datetime.now(UTC)
        picked = await outbox.pick_due(db, now=now, limit=1, lease=LEASE, webhooks=True)
        if not picked:
            break
        sent += await _deliver(db, http, picked[0], now)
    return sent


async def _deliver(db: Database, http: httpx.AsyncClient, row: OutboxRow, now: datetime) -> int:
    event = WebhookEvent.model_validate(row.payload)
    origin = await api_runs.origin_of(db, event.run_id)
    key = await api_keys.get(db, origin.key_id) if origin is not None else None
    if key is None or key.webhook_url is None or key.webhook_secret is None:
        await outbox.mark_sent(db, row.id, now=now, attempts=row.attempts)  # nobody listens
        return 0
    body = json.dumps({"type": event.type, "timestamp": event.timestamp, "data": event.data},
                      separators=(",", ":"), ensure_ascii=False)
    at = datetime.fromtimestamp(int(now.timestamp()), UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": event.id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(key.webhook_secret).sign(event.id, at, body),
    }
    try:
        response = await http.post(key.webhook_url, content=body.encode("utf-8"),
                                   headers=headers)
        failure = None if response.is_success else f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    if failure is None:
        await outbox.mark_sent(db, row.id, now=now, attempts=row.attempts)
        return 1
    if row.attempts >= MAX_ATTEMPTS:
        await outbox.mark_dead(db, row.id, error=failure, attempts=row.attempts)
        log.error("webhook %s for run %s is dead after %s attempts: %s", event.id, event.run_id,
                  row.attempts, failure, extra={"action": "webhook_dead", "outbox_id": row.id})
        return 0
    retry_at = now + timedelta(seconds=failures.backoff(row.attempts))
    await outbox.retry_later(db, row.id, at=retry_at, error=failure, attempts=row.attempts)
    log.warning("webhook %s for run %s not delivered (attempt %s): %s", event.id, event.run_id,
                row.attempts, failure, extra={"action": "webhook_retry", "outbox_id": row.id})
    return 0


class WebhookSender:
    """Runs ``deliver_due`` in the background every ``interval`` seconds."""

    def __init__(self, db: Database, *, interval: float = INTERVAL_SECONDS) -> None:
        self.db = db
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="signoff-webhooks")

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
            while not self._stopping.is_set():
                try:
                    await deliver_due(self.db, http)
                except errors.DatabaseUnavailable as exc:
                    log.warning("webhook pass skipped: %s", exc,
                                extra={"action": "webhook_pass_failed"})
                except Exception:  # the loop's boundary: log it, deliver next time
                    log.exception("webhook pass failed", extra={"action": "webhook_pass_failed"})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval)

    async def stop(self) -> None:
        """Let the pass under way finish, then stop.

        Cancelling a pass inside a database transaction leaves SQLAlchemy's
        connection half-used (``MissingGreenlet`` at shutdown), so the loop is
        asked to stop between passes; only a caller that stops waiting cancels it.
        """
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            raise
