"""Waking whoever waits on an external call, in this process and on every replica.

A write that changes an ``api_calls`` row calls :func:`notify` inside its
transaction. Once it commits, waiters in this process are woken directly; on
PostgreSQL the same transaction also sends ``NOTIFY signoff_calls``, which
PostgreSQL delivers at commit to every replica's :class:`Listener`. A waiter
registers (``watching``) *before* it reads the row, so a change that commits
between its read and its wait still wakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from store import errors
from store.engine import AFTER_COMMIT, Database

log = logging.getLogger(__name__)

CHANNEL = "signoff_calls"
_waiters: defaultdict[tuple[str, str], set[asyncio.Event]] = defaultdict(set)


def changed(run_id: str, call_id: str) -> None:
    """Wake this process's waiters on the call (a no-op when nobody waits)."""
    for event in _waiters.get((run_id, call_id), ()):
        event.set()


@contextlib.contextmanager
def watching(run_id: str, call_id: str) -> Iterator[asyncio.Event]:
    """An event set whenever the call changes, while the block runs."""
    event = asyncio.Event()
    key = (run_id, call_id)
    _waiters[key].add(event)
    try:
        yield event
    finally:
        _waiters[key].discard(event)
        if not _waiters[key]:
            del _waiters[key]


async def notify(conn: AsyncConnection, run_id: str, call_id: str) -> None:
    """Inside a write: wake the call's waiters once (and only if) the write commits."""
    hooks: list[Any] = conn.info.setdefault(AFTER_COMMIT, [])
    hooks.append(lambda: changed(run_id, call_id))
    if conn.dialect.name == "postgresql":
        await conn.execute(select(func.pg_notify(CHANNEL, f"{run_id} {call_id}")))


class Listener:
    """``LISTEN signoff_calls`` on one connection kept out of the pool (PostgreSQL only).

    Every notification wakes this process's waiters on that call. If the
    connection drops, waiters still see changes through their short poll
    (``bot.api`` re-reads at least once a second); :meth:`start` again to resume.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._conn: AsyncConnection | None = None

    async def start(self) -> None:
        if self.db.is_sqlite or self._conn is not None:
            return
        try:
            self._conn = await self.db.engine.connect()
            raw = await self._conn.get_raw_connection()
            driver: Any = raw.driver_connection  # asyncpg's own connection
            await driver.add_listener(CHANNEL, self._on_notify)
        except (DBAPIError, OSError) as exc:
            raise errors.DatabaseUnavailable(f"cannot LISTEN {CHANNEL}: {exc}") from exc

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        run_id, _, call_id = payload.partition(" ")
        changed(run_id, call_id)

    async def stop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing a dead connection may fail; it is gone
                await conn.close()
