"""The `signoff` command, run for real: `python -m bot` in a subprocess on a SQLite file."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bot import config
from store import engine, ledger, migrate, runs
from store.states import LedgerStatus
from store.transitions import Effects, LedgerCompletion
from tests.store import factories

REPO = Path(__file__).parents[2]


def signoff(
    *args: str, cwd: Path, database_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL", "PORT"))
    }
    # The package is installed editable, but a subprocess in tmp_path must still find it.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "utf-8"
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd, env=env, capture_output=True, text=True, encoding="utf-8", timeout=60,
    )


@pytest.fixture
async def url(tmp_path: Path) -> str:
    """A migrated SQLite database, by URL (each subprocess opens its own connection)."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    db = engine.connect(database_url)
    try:
        await migrate.upgrade(db)
    finally:
        await db.dispose()
    return database_url


async def test_db_upgrade__without_configuration_creates_signoff_db_in_cwd(
    tmp_path: Path,
) -> None:
    result = signoff("db", "upgrade", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "signoff.db").is_file()
    assert f"to {migrate.head()} (head)" in result.stdout
    again = signoff("db", "upgrade", cwd=tmp_path)
    assert again.returncode == 0 and "already at revision" in again.stdout


def test_db_current__reports_head_or_the_upgrade_hint(tmp_path: Path) -> None:
    before = signoff("db", "current", cwd=tmp_path)
    assert before.returncode == 2
    assert "signoff db upgrade" in before.stdout
    assert not (tmp_path / "signoff.db").exists()

    signoff("db", "upgrade", cwd=tmp_path)
    after = signoff("db", "current", cwd=tmp_path)
    assert after.returncode == 0
    assert f"revision {migrate.head()} (head)" in after.stdout


def test_runs_list__empty_database_says_no_runs(tmp_path: Path, url: str) -> None:
    result = signoff("runs", "list", cwd=tmp_path, database_url=url)

    assert result.returncode == 0, result.stderr
    assert "no runs" in result.stdout


async def test_runs_list__json_lists_runs_newest_first_and_filters(
    tmp_path: Path, url: str
) -> None:
    db = engine.connect(url)
    try:
        first = await factories.make_run(db, user_id="U1")
        second, token = await factories.make_suspended(db, user_id="U2")
    finally:
        await db.dispose()

    everything = signoff("runs", "list", "--json", cwd=tmp_path, database_url=url)
    suspended = signoff("runs", "list", "--state", "suspended", "--json",
                        cwd=tmp_path, database_url=url)
    by_user = signoff("runs", "list", "--user", "U1", cwd=tmp_path, database_url=url)

    assert everything.returncode == 0, everything.stderr
    listed = json.loads(everything.stdout)
    assert {r["id"] for r in listed} == {first.id, second.id}
    assert [r["id"] for r in json.loads(suspended.stdout)] == [second.id]
    assert token not in everything.stdout
    assert first.id in by_user.stdout and second.id not in by_user.stdout
    assert "running" in by_user.stdout and "STATE" in by_user.stdout


async def test_runs_show__prints_messages_events_and_never_the_full_token(
    tmp_path: Path, url: str
) -> None:
    db = engine.connect(url)
    try:
        run, token = await factories.make_suspended(db)
    finally:
        await db.dispose()

    text = signoff("runs", "show", run.id, cwd=tmp_path, database_url=url)
    as_json = signoff("runs", "show", run.id, "--json", cwd=tmp_path, database_url=url)

    assert text.returncode == 0, text.stderr
    assert "draft a quote for Henderson" in text.stdout  # the user message
    assert "suspended" in text.stdout and "start" in text.stdout  # events
    assert "steps 0/10" in text.stdout  # budget used against its limits
    assert token[:6] in text.stdout
    assert token not in text.stdout
    assert as_json.returncode == 0, as_json.stderr
    assert token not in as_json.stdout
    detail = json.loads(as_json.stdout)
    assert detail["run"]["id"] == run.id
    assert [e["kind"] for e in detail["events"]] == ["start", "suspended"]
    assert detail["approvals"][0]["token"].startswith(token[:6])


async def test_runs_show__token_in_message_text_is_masked(tmp_path: Path, url: str) -> None:
    token = secrets.token_urlsafe(24)
    now = factories.utcnow()
    db = engine.connect(url)
    try:
        run = await factories.make_run(db, messages=[{"role": "user", "content": f"use {token}"}])
        suspension = runs.Suspension(
            call_id="call_1", tool="send_quote", pending={"tool": "send_quote", "args": {}},
            preview={"title": token}, digest="d" * 64, token=token,
            expires_at=now + timedelta(minutes=30), card={"token": token},
        )
        await runs.suspend(db, run.id, run.lease_epoch, suspension, now=now, fx=Effects())
    finally:
        await db.dispose()

    text = signoff("runs", "show", run.id, cwd=tmp_path, database_url=url)
    as_json = signoff("runs", "show", run.id, "--json", cwd=tmp_path, database_url=url)

    assert text.returncode == 0, text.stderr
    assert f"use {token[:6]}..." in text.stdout
    assert token not in text.stdout and token not in as_json.stdout


async def test_runs_show__ledger_rows_are_listed(tmp_path: Path, url: str) -> None:
    db = engine.connect(url)
    try:
        run = await factories.make_run(db)
        await ledger.start(db, run.id, run.lease_epoch, call_id="call_9", tool="draft_quote",
                           args={"sku": "SKU-4411"}, idempotency_key="k-9",
                           now=factories.utcnow())
        done = LedgerCompletion("call_9", LedgerStatus.succeeded, {"quote_id": "Q-77"})
        await runs.record_step(
            db, run.id, run.lease_epoch, now=factories.utcnow(), steps=1, tool_calls=1,
            fx=Effects(ledger=[done], messages=[{"role": "tool", "tool_call_id": "call_9",
                                                 "name": "draft_quote", "content": "Q-77"}]),
        )
    finally:
        await db.dispose()

    result = signoff("runs", "show", run.id, cwd=tmp_path, database_url=url)

    assert result.returncode == 0, result.stderr
    ledger_section = result.stdout.split("Ledger (1)")[1].split("Approvals")[0]
    assert "call_9" in ledger_section and "draft_quote" in ledger_section
    assert "succeeded" in ledger_section and "Q-77" in ledger_section
    assert "steps 1/10" in result.stdout and "tool calls 1/10" in result.stdout


def test_runs_show__unknown_id_exits_1_with_a_clear_error(tmp_path: Path, url: str) -> None:
    result = signoff("runs", "show", "run_nope", cwd=tmp_path, database_url=url)

    assert result.returncode == 1
    assert result.stderr.startswith("error: no run with id 'run_nope'")
    assert "Traceback" not in result.stderr


async def test_runs__unmigrated_database_exits_2_with_the_upgrade_hint(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    url = f"sqlite+aiosqlite:///{path}"
    db = engine.connect(url)
    try:
        await db.ping()  # creates the file, with no schema
    finally:
        await db.dispose()

    listing = signoff("runs", "list", cwd=tmp_path, database_url=url)
    missing = signoff("runs", "show", "x", cwd=tmp_path,
                      database_url=f"sqlite+aiosqlite:///{tmp_path / 'absent.db'}")

    for result in (listing, missing):
        assert result.returncode == 2
        assert "signoff db upgrade" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "absent.db").exists()


def test_runs_list__unreachable_database_is_one_line_without_the_password(
    tmp_path: Path,
) -> None:
    url = "postgresql://signoff:hunter2@127.0.0.1:1/signoff"  # nothing listens on port 1

    result = signoff("runs", "list", cwd=tmp_path, database_url=url)

    assert result.returncode == 1
    assert result.stderr.startswith("error: database unreachable")
    assert "127.0.0.1:1" in result.stderr
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_bad_configuration__exits_2_naming_the_variable(tmp_path: Path) -> None:
    result = signoff("runs", "list", cwd=tmp_path, database_url="mysql://db/x")

    assert result.returncode == 2
    assert "DATABASE_URL" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["serve", "sandbox", "db", "runs"]),
        (("db",), ["upgrade", "current"]),
        (("runs",), ["list", "show"]),
        (("runs", "list"), ["--state", "--user", "--limit", "--json", "suspended"]),
        (("runs", "show"), ["ID", "--json"]),
        (("sandbox",), ["--port", "--app", "--database-url"]),
    ],
)
def test_help__lists_each_commands_subcommands_and_options(
    tmp_path: Path, args: tuple[str, ...], expected: list[str]
) -> None:
    result = signoff(*args, "--help", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    for word in expected:
        assert word in result.stdout


def test_serve_help__lists_every_setting(tmp_path: Path) -> None:
    result = signoff("serve", "--help", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "--port" in result.stdout and "--host" in result.stdout
    for env, _default, _description in config.settings_rows():
        assert env in result.stdout


def test_serve_help__names_every_scheduled_job_and_the_model_default(tmp_path: Path) -> None:
    result = signoff("serve", "--help", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    about = " ".join(result.stdout.split("Settings, read from the environment")[0].split())
    for job in ("expiry", "reaper", "outbox", "purge"):
        assert job in about, f"`serve --help` does not mention the {job} job"
    [model_row] = [line for line in result.stdout.splitlines()
                   if line.startswith("SIGNOFF_MODEL_NAME")]
    assert model_row.split()[1] == "gpt-4o-mini"


def test_version__prints_the_distribution_version(tmp_path: Path) -> None:
    result = signoff("--version", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout.startswith("signoff ")
