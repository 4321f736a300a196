"""Several OS processes on one PostgreSQL database: replicas racing for the same runs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from store import engine, events, runs, schema
from store.engine import Database
from store.states import RunState
from tests.store.factories import make_run, make_suspended

pytestmark = pytest.mark.postgres

PROC = Path(__file__).with_name("claimer_proc.py")
REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[Database]:
    """The session's PostgreSQL database, emptied: the reapers below sweep every run in it."""
    db = engine.connect(postgres_url)
    names = ", ".join(t.name for t in schema.metadata.sorted_tables)
    async with db.write() as conn:
        await conn.exec_driver_sql(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
    try:
        yield db
    finally:
        await db.dispose()


async def _run_together(*argvs: list[str]) -> list[dict[str, Any]]:
    """Start one process per argv, release them all at once, return each one's JSON report."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(PROC), *argv, cwd=REPO,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for argv in argvs
    ]
    try:
        for proc in procs:  # every process is connected before any starts
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
            if line != b"ready\n":
                _, err = await proc.communicate()
                raise AssertionError(f"process not ready: {line!r}\n{err.decode()}")
        for proc in procs:  # the start barrier
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
        await asyncio.gather(*(p.stdin.drain() for p in procs if p.stdin is not None))
        outputs = await asyncio.wait_for(
            asyncio.gather(*(p.communicate() for p in procs)), timeout=60
        )
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    return reports


async def test_claim__four_processes_of_25_claims_have_one_winner(
    pg: Database, postgres_url: str
) -> None:
    run, token = await make_suspended(pg, now=T0)
    now = (T0 + timedelta(minutes=1)).isoformat()

    reports = await _run_together(*(["claim", postgres_url, token, "25", now] for _ in range(4)))

    assert sum(r["wins"] for r in reports) == 1, reports
    refused: Counter[str] = Counter()
    for r in reports:
        refused.update(r["refused"])
    assert refused == {"already_decided": 99}
    [winner] = [w for r in reports for w in r["winners"]]
    after = await runs.get(pg, run.id)
    assert after.state is RunState.running and after.owner_id == winner
    assert after.lease_epoch == run.lease_epoch + 1
    assert [e.data["actor"] for e in await events.for_run(pg, run.id, kind="decision")] == [winner]


async def test_take_over_orphans__two_processes_take_each_orphan_once(
    pg: Database, postgres_url: str
) -> None:
    orphans = {r.id: r for r in [await make_run(pg, now=T0 - timedelta(minutes=10))
                                 for _ in range(20)]}
    alive = await make_run(pg, now=T0 - timedelta(seconds=30))  # heartbeat recent: not orphaned
    now, stale_before = T0.isoformat(), (T0 - timedelta(seconds=90)).isoformat()

    reports = await _run_together(
        *(["reap", postgres_url, owner, now, stale_before] for owner in ("reaper-1", "reaper-2"))
    )

    taken = [(run_id, owner) for r, owner in zip(reports, ("reaper-1", "reaper-2"), strict=True)
             for run_id in r["taken"]]
    assert sorted(run_id for run_id, _ in taken) == sorted(orphans), reports
    assert all(r["exhausted"] == [] for r in reports)
    for run_id, owner in taken:
        after = await runs.get(pg, run_id)
        assert after.state is RunState.running and after.owner_id == owner
        assert after.recovery_attempts == 1
        assert after.lease_epoch == orphans[run_id].lease_epoch + 1
        recovered = await events.for_run(pg, run_id, kind="recovered")
        assert [e.data for e in recovered] == [{"by": owner}]
    untouched = await runs.get(pg, alive.id)
    assert untouched.lease_epoch == alive.lease_epoch and untouched.recovery_attempts == 0
