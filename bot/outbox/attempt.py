"""One attempt at an outbox row: send it, then mark it sent, retried or dead.

The mark is written even through a short database outage (``_settle``): until
it is, only this process knows whether Slack has the message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import aiohttp
from pydantic import ValidationError
from slack_sdk.errors import SlackClientError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bot.cards import CardTooLarge
from bot.outbox import failures, slack_sender
from store import errors, outage, outbox
from store.engine import Database
from store.records import OutboxRow

log = logging.getLogger(__name__)

#: How long a delivery's outcome is held while the database is away; past that the
#: row waits out its lease (a longer outage is an incident; nothing is lost either way).
SETTLE_FOR_SECONDS = slack_sender.REMEMBER_FOR_SECONDS


@dataclass(frozen=True)
class Outcome:
    """What became of the row; ``stop`` names a failure that should end the pass."""

    state: Literal["sent", "retried", "dead"]
    stop: str | None = None


async def make(
    db: Database, client: AsyncWebClient, row: OutboxRow, *, now: datetime, max_attempts: int
) -> Outcome:
    try:
        sent = await slack_sender.send(db, client, row)
    except slack_sender.Wait as wait:
        return await _retry(db, row, at=now + timedelta(seconds=wait.seconds),
                            error=wait.reason, max_attempts=max_attempts)
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        failure = failures.classify(exc)
        if failure.kind == "permanent":
            return await _dead(db, row, failure.error)
        if failure.retry_after is not None:
            delay = failure.retry_after
        else:
            delay = failures.backoff(row.attempts)
        outcome = await _retry(db, row, at=now + timedelta(seconds=delay), error=failure.error,
                               max_attempts=max_attempts)
        return Outcome(outcome.state, stop=failure.error)
    except (slack_sender.Undeliverable, ValidationError, CardTooLarge,
            SlackObjectFormationError) as exc:
        return await _dead(db, row, f"{type(exc).__name__}: {exc}")
    except slack_sender.PostedUnrecorded:
        raise  # in Slack, not in the store: the row's next attempt finds the card and adopts it
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
    return Outcome("sent")


async def _retry(
    db: Database, row: OutboxRow, *, at: datetime, error: str, max_attempts: int
) -> Outcome:
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
    return Outcome("retried")


async def _dead(db: Database, row: OutboxRow, error: str) -> Outcome:
    # A card nobody will see must not leave its requester waiting in silence.
    told = slack_sender.dead_card_notice(row, error)
    await _settle(row, "marking dead", lambda: outbox.mark_dead(
        db, row.id, error=error, attempts=row.attempts, follow_up=told))
    log.error(
        "outbox row %s (%s, run %s) is dead after %s attempt(s): %s; %s. Fix the cause, then "
        "`signoff outbox retry %s` (`signoff outbox list --dead` lists dead rows)",
        row.id, row.kind, row.run_id, row.attempts, error,
        "the requester is told by DM" if told else "nobody was told", row.id,
        extra={"action": "outbox_dead", "outbox_id": row.id, "run_id": row.run_id,
               "kind": row.kind, "attempts": row.attempts, "error": error},
    )
    return Outcome("dead")


async def _settle(row: OutboxRow, what: str, mark: Callable[[], Awaitable[bool]]) -> None:
    """Write a row's outcome, holding it through a short database outage.

    Until it is written only this process knows it; lost, the row would wait out
    its lease and then be tried again (a "sent" row posted twice). The marks are
    fenced by ``attempts``, so a retry after a commit whose answer was lost is a no-op.
    """
    await outage.hold(lambda _attempt: mark(), seconds=SETTLE_FOR_SECONDS, run_id=row.run_id,
                      what=f"{what} outbox row {row.id}")
