"""Signed requests already let through, so a replay of the same bytes is refused.

A Slack request is identified by its timestamp and signature (an HMAC over
both and the body). ``first_sight`` records the pair under a unique key and
says whether it was new; because the table is shared, a replay sent to another
replica is refused too. A pair only needs keeping while its timestamp is inside
the signature window (an older one fails the signature check anyway), so rows
past the window are pruned by the same writes, at most once per ``prune_every``.

It sits in front of every click, so it must cost little: pairs arriving while a
write is in flight wait for it and then go together in one multi-row
``INSERT ... ON CONFLICT DO NOTHING RETURNING`` (one transaction, one commit,
however many clicks arrived at once), and on PostgreSQL that commit does not
wait for the WAL flush (``synchronous_commit = off``): a crash can forget the
last fraction of a second of pairs, never record a pair that was not seen.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sqlalchemy import delete, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from store import errors, schema
from store.engine import Database

SEEN = schema.seen_requests
Pair = tuple[int, str]


@dataclass
class SeenRequests:
    """The shared record of (timestamp, signature) pairs inside the signature window."""

    db: Database
    #: How long a pair is kept past its timestamp: the window plus room for clock skew.
    keep_seconds: int
    #: How often (seconds, per process) a write also deletes pairs past ``keep_seconds``.
    prune_every: float = 60.0
    _pruned_at: float = field(default_factory=time.time, repr=False)
    _waiting: list[tuple[Pair, asyncio.Future[bool]]] = field(default_factory=list, repr=False)
    _writing: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def first_sight(self, stamp: int, signature: str) -> bool:
        """Record ``(stamp, signature)``; False when it was already recorded (a replay)."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append(((stamp, signature), answer))
        async with self._writing:
            if not answer.done():  # an earlier writer may have taken it along
                await self._write_waiting()
        return await answer

    async def _write_waiting(self) -> None:
        batch, self._waiting = self._waiting, []
        try:
            async with self.db.write() as conn:
                new = await self._insert(conn, list(dict.fromkeys(p for p, _ in batch)))
                await self._maybe_prune(conn)
        except BaseException as exc:
            # Every waiter hears of it, even when this writer was cancelled mid-write.
            told = exc if isinstance(exc, Exception) else errors.DatabaseUnavailable(
                "recording a request was interrupted")
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(told)
            if not isinstance(exc, Exception):
                raise
            return
        for pair, answer in batch:
            answer.set_result(pair in new)
            new.discard(pair)  # the same pair twice in one batch: the second is a replay

    async def _insert(self, conn: AsyncConnection, pairs: list[Pair]) -> set[Pair]:
        rows = [{"stamp": s, "signature": sig} for s, sig in pairs]
        columns = (SEEN.c.stamp, SEEN.c.signature)
        if self.db.is_sqlite:
            stmt = sqlite.insert(SEEN).values(rows).on_conflict_do_nothing().returning(*columns)
        else:
            await conn.execute(text("SET LOCAL synchronous_commit = off"))
            stmt = postgresql.insert(SEEN).values(rows).on_conflict_do_nothing().returning(*columns)
        inserted = await conn.execute(stmt)
        return {(int(s), str(sig)) for s, sig in inserted.all()}

    async def _maybe_prune(self, conn: AsyncConnection) -> None:
        now = time.time()
        if now - self._pruned_at >= self.prune_every:
            self._pruned_at = now
            await conn.execute(delete(SEEN).where(SEEN.c.stamp < int(now) - self.keep_seconds))

    async def prune(self, *, now: float | None = None) -> int:
        """Delete every pair whose timestamp is past the window; how many went."""
        cutoff = int(time.time() if now is None else now) - self.keep_seconds
        async with self.db.write() as conn:
            result = await conn.execute(delete(SEEN).where(SEEN.c.stamp < cutoff))
        return int(result.rowcount)
