"""Fixtures for the client's tests: a real `signoff serve` on SQLite (and on PostgreSQL where
a test asks for both), a key for it, and the test's payments system.

``module_server`` is one `signoff serve` for a whole module (its tests must run in the module's
event loop, where the Slack stand-in lives: ``pytest.mark.asyncio(loop_scope="module")``);
each of its tests starts runs of its own and finds its cards by run id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.client import harness
from tests.client.refunds import Payments
from tests.conftest import PostgresServer


@pytest.fixture
def payments(tmp_path: Path) -> Payments:
    payments = Payments(tmp_path / "payments.json")
    payments.add_order("A-1", 40.0)
    return payments


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[harness.Served]:
    async with harness.served(harness.sqlite_db(tmp_path), tmp_path) as served:
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_server(tmp_path_factory: pytest.TempPathFactory
                        ) -> AsyncIterator[harness.Served]:
    tmp = tmp_path_factory.mktemp("server")
    async with harness.served(harness.sqlite_db(tmp), tmp) as served:
        yield served


@pytest.fixture
def keyed_server(module_server: harness.Served) -> harness.Served:
    """The module's server with a key of the test's own: it sees only its own runs' cards, and
    lists only its own calls."""
    return module_server.with_own_key("client-test")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at head on either dialect (a sync fixture: the PostgreSQL helpers run
    their own event loop)."""
    if request.param == "sqlite":
        return harness.sqlite_db(tmp_path)
    postgres: PostgresServer = request.getfixturevalue("postgres_server")
    url = postgres.create_database()
    harness.signoff_cli(url, "db", "upgrade")
    return url


@pytest.fixture
async def any_server(any_db_url: str, tmp_path: Path) -> AsyncIterator[harness.Served]:
    async with harness.served(any_db_url, tmp_path) as served:
        yield served
