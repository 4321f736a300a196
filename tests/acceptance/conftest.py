"""Fixtures for the acceptance scenarios, and the summary line printed at the end of the run.

``replica_db`` is a fresh PostgreSQL database per test, brought to head with
the real ``signoff db upgrade`` (``signoff serve`` refuses a database that is
not) and holding the quotes example's CRM tables.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from examples.crm import CRM
from store import engine
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
    url = postgres_server.create_database()
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
