"""A separate OS process that races others on one database (see test_multiprocess_pg.py).

    python tests/store/claimer_proc.py claim URL TOKEN N NOW
    python tests/store/claimer_proc.py reap URL OWNER NOW STALE_BEFORE

The process connects, prints ``ready``, waits for a line on stdin (the start
barrier: the parent releases every process at once), does its work and prints
one JSON line with what it won.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from datetime import datetime
from typing import Any

from store import claims, engine, sweeps
from store.engine import Database
from store.transitions import Effects


async def _ready(db: Database) -> None:
    await db.ping()
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: blocks until the parent says go


async def claim(db: Database, token: str, n: int, now: datetime) -> dict[str, Any]:
    owner = f"proc-{os.getpid()}"

    async def one(i: int) -> claims.ClaimWon | claims.ClaimRefused:
        actor = f"{owner}-{i}"
        return await claims.claim(
            db, token, decision="approve", actor=actor, reason=None, owner_id=actor,
            now=now,
            fx=Effects(events=[("decision", {"actor": actor})]),
        )

    await _ready(db)
    results = await asyncio.gather(*(one(i) for i in range(n)))
    won = [r for r in results if isinstance(r, claims.ClaimWon)]
    refused = Counter(r.reason for r in results if isinstance(r, claims.ClaimRefused))
    return {"wins": len(won), "winners": [r.approval.decided_by for r in won],
            "refused": dict(refused)}


async def reap(db: Database, owner: str, now: datetime, stale_before: datetime) -> dict[str, Any]:
    await _ready(db)
    taken: list[str] = []
    exhausted: list[str] = []
    while True:
        result = await sweeps.take_over_orphans(
            db, now=now, stale_before=stale_before, owner_id=owner, max_attempts=2, limit=3,
            exhausted_effects=lambda r: Effects(events=[("recovery_exhausted", {})]),
            taken_effects=lambda r: Effects(events=[("recovered", {"by": owner})]),
        )
        if not result.taken and not result.exhausted:
            return {"taken": taken, "exhausted": exhausted}
        taken += [r.id for r in result.taken]
        exhausted += [r.id for r in result.exhausted]


async def main(argv: list[str]) -> dict[str, Any]:
    mode, url, *rest = argv
    db = engine.connect(url)
    try:
        if mode == "claim":
            token, n, now = rest
            return await claim(db, token, int(n), datetime.fromisoformat(now))
        if mode == "reap":
            owner, now, stale_before = rest
            return await reap(db, owner, datetime.fromisoformat(now),
                              datetime.fromisoformat(stale_before))
        raise SystemExit(f"unknown mode {mode!r}: use claim or reap")
    finally:
        await db.dispose()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))), flush=True)
