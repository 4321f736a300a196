"""Fixtures shared by every test package: real databases on both dialects.

SQLite: a fresh file per test (WAL, never ``:memory:``). PostgreSQL: one
database per test session, created from ``SIGNOFF_TEST_POSTGRES_URL`` (default:
the local server, when it answers), migrated once and truncated between tests.
With ``SIGNOFF_REQUIRE_POSTGRES=1`` (CI) an unreachable server fails the
PostgreSQL tests instead of skipping them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import hypothesis
import pytest
from sqlalchemy.engine import make_url

from store import engine as store_engine
from store import migrate, schema
from store.engine import Database
from tests.tcp_proxy import Proxy, proxied

# In CI Hypothesis derives its examples from each test's name instead of at random: a CI run
# is reproducible, and what it finds fails every time. Locally every run searches anew.
hypothesis.settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")

DEFAULT_PG_ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"

# Bolt turns on OAuth when these are set; tests never want the caller's Slack settings.
_KEEP = {
    "SIGNOFF_TEST_POSTGRES_URL",
    "SIGNOFF_REQUIRE_POSTGRES",
    "SIGNOFF_REQUIRE_BROWSER",
    "SIGNOFF_SHARED_DIR",
    "SIGNOFF_SCREENSHOTS_DIR",
}
for _name in list(os.environ):
    if _name.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL")) and _name not in _KEEP:
        del os.environ[_name]


def _require_postgres() -> bool:
    return os.environ.get("SIGNOFF_REQUIRE_POSTGRES") == "1"


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _pg_admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class PostgresServer:
    """The test session's PostgreSQL: can create throwaway databases."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    def create_database(self) -> str:
        name = f"signoff_test_{secrets.token_hex(4)}"
        asyncio.run(_pg_admin(self.admin_url, f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return make_url(self.admin_url).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        for name in self.created:
            asyncio.run(_pg_admin(self.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    url = os.environ.get("SIGNOFF_TEST_POSTGRES_URL", DEFAULT_PG_ADMIN_URL)
    try:
        asyncio.run(_pg_admin(url, "SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        message = f"PostgreSQL not reachable at {url}: {exc!r}"
        if _require_postgres():
            pytest.fail(f"{message} (SIGNOFF_REQUIRE_POSTGRES=1: PostgreSQL tests must run)")
        pytest.skip(message)
    server = PostgresServer(url)
    yield server
    server.drop_all()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """A migrated database shared by the session's PostgreSQL tests."""
    url = postgres_server.create_database()
    _on_database(url, migrate.upgrade)
    return url


def _on_database(url: str, work: Callable[[Database], Awaitable[None]]) -> None:
    """Run ``work`` on a Database for ``url`` in its own event loop, then dispose of it."""

    async def _run() -> None:
        db = store_engine.connect(url)
        try:
            await work(db)
        finally:
            await db.dispose()

    asyncio.run(_run())


async def _truncate(db: Database) -> None:
    """Empty every table but Alembic's: signoff's and any an example app created."""
    async with db.write() as conn:
        names = (await conn.exec_driver_sql(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version'")).scalars().all()
        assert {t.name for t in schema.metadata.sorted_tables} <= set(names)
        quoted = ", ".join(f'"{n}"' for n in names)
        await conn.exec_driver_sql(f"TRUNCATE {quoted} RESTART IDENTITY CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database URL, once per dialect."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
        _on_database(url, migrate.upgrade)
        return url
    url = str(request.getfixturevalue("postgres_url"))
    _on_database(url, _truncate)
    return url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = store_engine.connect(database_url)
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
async def pg_outage(postgres_url: str) -> AsyncIterator[tuple[Proxy, Database, Database]]:
    """An empty PostgreSQL database behind a proxy a test can cut (a real outage):
    (the proxy, a Database through it, a Database straight to the server for checking)."""
    direct = store_engine.connect(postgres_url)
    await _truncate(direct)
    async with proxied(postgres_url) as (proxy, url):
        through = store_engine.connect(url)
        try:
            yield proxy, through, direct
        finally:
            await through.dispose()
            await direct.dispose()
