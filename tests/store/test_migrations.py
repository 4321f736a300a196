from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from store import engine, errors, migrate, schema
from tests.conftest import PostgresServer

R = TypeVar("R")


def _urls(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _urls(tmp_path, request)


async def _run_sync(db: engine.Database, fn: Callable[[Connection], R]) -> R:
    async with db.read() as conn:
        return await conn.run_sync(fn)


async def test_migrations__empty_head_base_head_and_no_drift(empty_url: str) -> None:
    db = engine.connect(empty_url)
    try:
        with pytest.raises(errors.SchemaOutdated, match="signoff db upgrade"):
            await migrate.require_head(db)
        await migrate.upgrade(db)
        assert await migrate.current(db) == migrate.head()
        await migrate.downgrade(db, "base")
        tables = await _run_sync(db, lambda c: inspect(c).get_table_names())
        assert set(tables) <= {"alembic_version"}
        await migrate.upgrade(db)
        await migrate.require_head(db)

        def _diff(conn: Connection) -> list[object]:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(ctx, schema.metadata))

        assert await _run_sync(db, _diff) == []
    finally:
        await db.dispose()


def test_migrations__upgrade_with_no_configuration_creates_signoff_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def _go() -> None:
        db = engine.connect()
        try:
            await migrate.upgrade(db)
        finally:
            await db.dispose()

    asyncio.run(_go())
    assert (tmp_path / "signoff.db").exists()
