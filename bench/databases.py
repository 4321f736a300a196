"""Throwaway databases with signoff's schema, and raw-driver connections to them.

Every benchmark database is migrated with ``store.migrate.upgrade`` (the same
schema `signoff db upgrade` builds) and dropped afterwards. Raw connections are
set up exactly as ``store.engine`` sets up its own (WAL, synchronous=FULL,
busy_timeout, autocommit off so ``BEGIN IMMEDIATE`` is ours), so a comparison
measures the layers above the driver, not different durability.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg  # untyped: pyproject.toml tells mypy so
from sqlalchemy.engine import make_url

from store import engine as store_engine
from store import migrate
from store.engine import Database


@dataclass
class Target:
    """One migrated benchmark database."""

    dialect: str
    url: str  # SQLAlchemy URL for store.engine.connect
    raw: str  # aiosqlite path or asyncpg DSN
    path: Path | None = None  # SQLite file

    def connect(self, **engine_kwargs: Any) -> Database:
        return store_engine.connect(self.url, **engine_kwargs)


@asynccontextmanager
async def fresh(dialect: str, pg_admin: str, *, migrated: bool = True) -> AsyncIterator[Target]:
    """A new empty database (SQLite file in a temp dir, or a PostgreSQL database), then gone."""
    if dialect == "sqlite":
        tmp = Path(tempfile.mkdtemp(prefix="signoff-bench-"))
        path = tmp / "bench.db"
        target = Target("sqlite", f"sqlite+aiosqlite:///{path}", str(path), path)
        try:
            if migrated:
                await _migrate(target)
            yield target
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    name = f"signoff_bench_{secrets.token_hex(4)}"
    await _admin(pg_admin, f'CREATE DATABASE "{name}"')
    dsn = make_url(pg_admin).set(database=name).render_as_string(hide_password=False)
    target = Target("postgresql", dsn.replace("postgresql://", "postgresql+asyncpg://", 1), dsn)
    try:
        if migrated:
            await _migrate(target)
        yield target
    finally:
        await _admin(pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _migrate(target: Target) -> None:
    db = target.connect()
    try:
        await migrate.upgrade(db)
    finally:
        await db.dispose()


async def _admin(admin_url: str, sql: str) -> None:
    conn = await asyncpg.connect(admin_url, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def sqlite_raw(path: str) -> aiosqlite.Connection:
    """An aiosqlite connection configured as store.engine configures its own."""
    conn = await aiosqlite.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=FULL",
                   f"busy_timeout={store_engine.SQLITE_BUSY_TIMEOUT_MS}", "foreign_keys=ON"):
        await conn.execute(f"PRAGMA {pragma}")
    return conn


def sqlite_ts(value: datetime) -> str:
    """A timestamp as SQLAlchemy stores it in SQLite (naive UTC text)."""
    return value.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def ts(dialect: str, value: datetime) -> Any:
    return sqlite_ts(value) if dialect == "sqlite" else value


def sqlite_bytes(path: Path) -> int:
    """Main file plus WAL (and shared-memory index), as they are on disk now."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


async def pg_relation_bytes(dsn: str, tables: list[str]) -> int:
    """pg_total_relation_size (heap + TOAST + indexes) summed over ``tables``."""
    conn = await asyncpg.connect(dsn)
    try:
        total = 0
        for name in tables:
            total += int(await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", name))
        return total
    finally:
        await conn.close()
