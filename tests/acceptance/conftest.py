"""Fixtures for the acceptance scenarios, and the summary line printed at the end of the run.

``replica_db`` is a fresh PostgreSQL database per test, brought to head with
the real ``signoff db upgrade`` (``signoff serve`` refuses a database that is
not) and holding the quotes example's CRM tables. ``own_postgres`` is the same
on a throwaway server of the test's own (``tests.throwaway_postgres``), for a
scenario that restarts PostgreSQL: the shared server is never restarted.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from examples.crm import CRM
from store import engine
from tests import throwaway_postgres
from tests.acceptance import ledger_summary, replicas
from tests.conftest import PostgresServer


async def _crm_setup(url: str) -> None:
    db = engine.connect(url)
    try:
        await CRM(db).setup()
    finally:
        await db.dispose()


@pytest.fixture
def replica_db(postgres_server: PostgresServer) -> str:
    """A new database at head with the CRM's tables: the URL every replica is given."""
    return _prepared(postgres_server.create_database())


@dataclass(frozen=True)
class OwnPostgres:
    """A database on a PostgreSQL server of the test's own, which the test may restart."""

    url: str
    restart_command: list[str]


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    """Like ``replica_db``, on a throwaway server started for this test and removed after it."""
    found = throwaway_postgres.server_bin()
    if found is None:
        reason = "no PostgreSQL server binaries (initdb, pg_ctl) to start a throwaway server"
        if os.environ.get("SIGNOFF_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    with throwaway_postgres.throwaway(found) as server:
        admin = PostgresServer(server.admin_url)
        yield OwnPostgres(_prepared(admin.create_database()), server.restart_command)


def _prepared(url: str) -> str:
    """``url`` brought to head by ``signoff db upgrade``, with the CRM's tables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "SIGNOFF_"))}
    env["DATABASE_URL"] = url
    done = subprocess.run([sys.executable, "-m", "bot", "db", "upgrade"], cwd=replicas.REPO,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"signoff db upgrade failed:\n{done.stdout}\n{done.stderr}"
    asyncio.run(_crm_setup(url))
    return url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line CI logs show: what the acceptance scenarios held, and what they found."""
    if ledger_summary.touched():
        terminalreporter.write_sep("=", "acceptance summary")
        terminalreporter.write_line(ledger_summary.line())
