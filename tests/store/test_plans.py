"""The sweeps must read through their partial indexes, not scan retained runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from store import schema, sweeps
from store.engine import Database


async def _fill(db: Database, n: int) -> None:
    now = datetime.now(UTC)
    rows = [
        {
            "id": f"run_{i:08d}", "user_id": "U1", "question": "q",
            "state": "answered" if i % 3 else "failed", "limits": "{}",
            "snapshot_version": 1, "app_fingerprint": "f", "started_at": now,
            "updated_at": now - timedelta(days=1),
        }
        for i in range(n)
    ]
    async with db.write() as conn:
        await conn.execute(insert(schema.runs), rows)
        if not db.is_sqlite:
            await conn.exec_driver_sql("ANALYZE runs")


async def _plan(db: Database, stmt: object) -> str:
    from sqlalchemy.sql import Select

    assert isinstance(stmt, Select)
    compiled = stmt.compile(db.engine, compile_kwargs={"literal_binds": True})
    prefix = "EXPLAIN QUERY PLAN " if db.is_sqlite else "EXPLAIN "
    async with db.read() as conn:
        rows = (await conn.exec_driver_sql(prefix + str(compiled))).all()
    return "\n".join(str(r[-1]) for r in rows)


async def test_sweeps__expiry_and_orphan_queries_use_partial_indexes(db: Database) -> None:
    await _fill(db, 10_000)
    now = datetime.now(UTC)
    expiry = await _plan(db, sweeps.expiry_candidates(now, 100))
    orphans = await _plan(db, sweeps.orphan_candidates(now, 50))
    assert "ix_runs_suspended_expires" in expiry, expiry
    assert "ix_runs_running_heartbeat" in orphans, orphans
