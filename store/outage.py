"""Riding out a short database outage while holding something only this process knows.

A tool's result, a posted card's ts, a delivered row's "sent": each exists in
this process's memory and nowhere else until it is written. Giving up at the
first failed write turns a three-second database restart into a lost result
(reconciled later, at best) or a second Slack post. ``hold`` retries the write
with a short backoff instead, for a bounded time, then lets the error through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from store import errors

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Backoff between tries: short at first, and never so long that the write lags far
#: behind the database's return.
FIRST_DELAY, MAX_DELAY = 0.1, 2.0


async def hold(
    write: Callable[[int], Awaitable[T]], *, seconds: float, what: str,
    run_id: str | None = None,
) -> T:
    """``await write(attempt)`` (attempt 0, 1, ...) until the database answers.

    After ``seconds`` of DatabaseUnavailable the last one is raised. A retry may
    follow an attempt whose commit landed but whose answer was lost: ``write``
    must tolerate that (a fenced UPDATE does; an append checks first when
    ``attempt > 0``).
    """
    delay, waited, attempt = FIRST_DELAY, 0.0, 0
    while True:
        try:
            return await write(attempt)
        except errors.DatabaseUnavailable:
            if waited >= seconds:
                raise
            log.warning("database unavailable %s; retrying", what,
                        extra={"action": "db_retry", "run_id": run_id, "attempt": attempt})
            await asyncio.sleep(delay)
            waited += delay
            attempt += 1
            delay = min(delay * 2, MAX_DELAY)
