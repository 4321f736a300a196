"""Seen requests: one row per (timestamp, signature), shared by every replica, pruned by age."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import func, select

from store import schema
from store.engine import Database
from store.seen import SeenRequests

SIG = "v0=" + "a" * 64


async def _rows(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(
            select(func.count()).select_from(schema.seen_requests))).scalar_one())


async def test_seen__a_pair_is_new_once_whichever_process_records_it(db: Database) -> None:
    now = int(time.time())
    one, other = SeenRequests(db, keep_seconds=360), SeenRequests(db, keep_seconds=360)

    assert await one.first_sight(now, SIG) is True
    assert await other.first_sight(now, SIG) is False
    assert await one.first_sight(now, SIG) is False
    # Another timestamp or another signature is another request.
    assert await other.first_sight(now + 1, SIG) is True
    assert await other.first_sight(now, "v0=" + "b" * 64) is True
    assert await _rows(db) == 3


async def test_seen__pairs_past_the_window_are_pruned_and_recent_ones_kept(db: Database) -> None:
    now = int(time.time())
    seen = SeenRequests(db, keep_seconds=360, prune_every=3600)
    for age in (1000, 361, 359, 0):
        assert await seen.first_sight(now - age, SIG)

    assert await seen.prune(now=now) == 2
    assert await _rows(db) == 2
    assert await seen.first_sight(now - 359, SIG) is False


async def test_seen__recording_prunes_old_pairs_on_its_own(db: Database) -> None:
    now = int(time.time())
    quiet = SeenRequests(db, keep_seconds=360, prune_every=3600)
    assert await quiet.first_sight(now - 1000, SIG)
    door = SeenRequests(db, keep_seconds=360, prune_every=0)

    assert await door.first_sight(now, SIG)

    assert await _rows(db) == 1


async def test_seen__concurrent_pairs_share_one_write_and_each_gets_its_answer(
    db: Database,
) -> None:
    now = int(time.time())
    seen = SeenRequests(db, keep_seconds=360)
    pairs = [(now, f"v0={i:064d}") for i in range(30)]
    assert await seen.first_sight(*pairs[0])

    # Every pair at once, some twice, one already recorded: new exactly once each.
    answers = await asyncio.gather(*(seen.first_sight(*p) for p in [*pairs, *pairs[5:10]]))

    assert answers[0] is False
    assert answers[1:30] == [True] * 29 and answers[30:] == [False] * 5
    assert await _rows(db) == 30
