"""Signed requests already let through, so a replay of the same bytes is refused.

A Slack request is identified by its timestamp and signature (an HMAC over
both and the body). ``first_sight`` records the pair under a unique key and
says whether it was new; because the table is shared, a replay sent to another
replica is refused too. A pair only needs keeping while its timestamp is inside
the signature window (an older one fails the signature check anyway), so rows
past the window are pruned by the same write, at most once per ``prune_every``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite

from store import schema
from store.engine import Database

t = schema.seen_requests


@dataclass
class SeenRequests:
    """The shared record of (timestamp, signature) pairs inside the signature window."""

    db: Database
    #: How long a pair is kept past its timestamp: the window plus room for clock skew.
    keep_seconds: int
    #: How often (seconds, per process) a recording also deletes pairs past ``keep_seconds``.
    prune_every: float = 60.0
    _pruned_at: float = field(default_factory=time.time, repr=False)

    async def first_sight(self, stamp: int, signature: str) -> bool:
        """Record ``(stamp, signature)``; False when it was already recorded (a replay)."""
        values = {"stamp": stamp, "signature": signature}
        insert = (sqlite.insert(t).values(values).on_conflict_do_nothing() if self.db.is_sqlite
                  else postgresql.insert(t).values(values).on_conflict_do_nothing())
        now = time.time()
        async with self.db.write() as conn:
            result = await conn.execute(insert)
            if now - self._pruned_at >= self.prune_every:
                self._pruned_at = now
                await conn.execute(delete(t).where(t.c.stamp < int(now) - self.keep_seconds))
        return bool(result.rowcount)

    async def prune(self, *, now: float | None = None) -> int:
        """Delete every pair whose timestamp is past the window; how many went."""
        cutoff = int(time.time() if now is None else now) - self.keep_seconds
        async with self.db.write() as conn:
            result = await conn.execute(delete(t).where(t.c.stamp < cutoff))
        return int(result.rowcount)
