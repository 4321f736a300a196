"""Operator mistakes end in one line saying what is wrong and what to do, with the exit
code `signoff --help` gives for it. The real CLI runs in a subprocess."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.bot.test_cli import REPO
from tests.conftest import PostgresServer

NOT_SET_UP, UNREACHABLE = 2, 3


def signoff(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL", "PORT"))}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=cwd, env={**base, **env},
        capture_output=True, text=True, encoding="utf-8", timeout=60,
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in result.stderr, result.stderr
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


SLACK = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "signing-secret"}


@pytest.mark.postgres
@pytest.mark.parametrize("command", [("db", "upgrade"), ("runs", "list"), ("serve",),
                                     ("sandbox", "--port", "0")])
def test_a_postgres_database_that_does_not_exist_is_one_line_and_exit_2(
    tmp_path: Path, postgres_server: PostgresServer, command: tuple[str, ...]
) -> None:
    name = f"signoff_absent_{secrets.token_hex(4)}"
    url = make_url(postgres_server.admin_url).set(database=name)
    address = url.render_as_string(hide_password=False)
    env = {**SLACK, "DATABASE_URL": address, "PORT": "1"} if command[0] != "sandbox" else {}
    args = (*command, "--database-url", address) if command[0] == "sandbox" else command
    if command == ("serve",):
        env["PORT"] = "65000"  # never reached: the database is checked first

    result = signoff(*args, cwd=tmp_path, **env)

    assert result.returncode == NOT_SET_UP, result.stderr
    line = _one_line_error(result)
    assert f'database "{name}" does not exist' in line and "createdb" in line


@pytest.mark.postgres
def test_a_postgres_role_that_does_not_exist_is_one_line_and_exit_2(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    role = f"signoff_nobody_{secrets.token_hex(4)}"
    url = make_url(postgres_server.admin_url).set(username=role)

    result = signoff("runs", "list", cwd=tmp_path,
                     DATABASE_URL=url.render_as_string(hide_password=False))

    assert result.returncode == NOT_SET_UP, result.stderr
    line = _one_line_error(result)
    assert f'role "{role}" does not exist' in line and "createuser" in line


def test_serve_on_a_busy_port_is_one_line_and_exit_2(tmp_path: Path, busy_port: int) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    assert signoff("db", "upgrade", cwd=tmp_path, DATABASE_URL=database).returncode == 0

    result = signoff("serve", "--host", "127.0.0.1", "--port", str(busy_port), cwd=tmp_path,
                     DATABASE_URL=database, **SLACK)

    assert result.returncode == NOT_SET_UP, result.stderr
    line = _one_line_error(result)
    assert f"cannot listen on 127.0.0.1:{busy_port}" in line and "--port" in line


def test_sandbox_with_an_app_that_does_not_exist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = signoff("sandbox", "--port", "0", "--app", "nosuch:app", "--database-url",
                     f"sqlite+aiosqlite:///{tmp_path / 'sandbox.db'}", cwd=tmp_path)

    assert result.returncode == NOT_SET_UP, result.stderr
    line = _one_line_error(result)
    assert "nosuch:app" in line and "No module named 'nosuch'" in line


def test_an_unreachable_database_exits_with_the_code_help_gives_for_it(tmp_path: Path) -> None:
    result = signoff("runs", "list", cwd=tmp_path,
                     DATABASE_URL="postgresql://signoff@127.0.0.1:1/signoff")
    helped = signoff("--help", cwd=tmp_path)

    assert result.returncode == UNREACHABLE
    assert _one_line_error(result).startswith("error: database unreachable")
    assert f"  {UNREACHABLE}  database unreachable" in helped.stdout
    assert f"  {NOT_SET_UP}  not set up" in helped.stdout and "database or role missing" in (
        helped.stdout)
