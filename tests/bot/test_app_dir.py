"""An app in the folder `signoff` runs in loads, as with uvicorn and gunicorn.

Run for real: the installed ``signoff`` script (whose own folder, not the
current one, starts its import path) in a temporary folder holding ``myapp.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.replicas import free_port

SIGNOFF = Path(sys.executable).with_name("signoff")
MYAPP = '''
from pydantic import BaseModel

from resume import App, Scope, ScriptedModel, Tool, ToolContext, call


class Hello(BaseModel):
    who: str


async def greet(args: Hello, ctx: ToolContext) -> dict[str, str]:
    return {"greeted": args.who}


async def everyone(user_id: str) -> Scope:
    return Scope(user_id=user_id, tools="*")


app = App(name="myapp", scope=everyone,
          tools=[Tool(name="greet", description="Greet someone.", args=Hello, execute=greet,
                      confirm=True)],
          model=ScriptedModel.turns([call("greet", who="Ada"), "Greeted Ada."]))
'''
#: Printed once the app has loaded and the process is serving.
STARTED = re.compile(r"open http://127\.0\.0\.1:\d+/|signoff serving on")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL", "PORT", "PYTHONPATH"))}
    env["DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp / 'signoff.db'}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_until_started(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Start ``signoff args``; return its output once it serves (then SIGTERM) or exits."""
    proc = subprocess.Popen([str(SIGNOFF), *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if STARTED.search(line):
                started.set()
        started.set()  # exited

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started.wait(60)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(10)
    return "".join(lines)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "myapp.py").write_text(MYAPP, encoding="utf-8")
    yield tmp_path


def test_sandbox__loads_an_app_from_the_current_folder(folder: Path) -> None:
    said = _run_until_started(["sandbox", "--port", "0", "--app", "myapp:app"], folder,
                              _env(folder))
    assert "open http://127.0.0.1:" in said and "myapp:app" in said, said
    assert "Traceback" not in said and "ModuleNotFoundError" not in said, said


def test_serve__loads_an_app_from_the_current_folder(folder: Path) -> None:
    env = {**_env(folder), "SIGNOFF_APP": "myapp:app", "SLACK_BOT_TOKEN": "xoxb-test",
           "SLACK_SIGNING_SECRET": "not-a-real-secret", "PORT": str(free_port())}
    said = _run_until_started(["serve"], folder, env)
    assert "signoff serving on" in said, said
    # The app loaded: serve warns that greet's requester may approve their own call.
    assert "tool greet asks for approval" in said, said


def test_sandbox__app_dir_names_another_folder(
    folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    args = ["sandbox", "--port", "0", "--app", "myapp:app"]
    said = _run_until_started([*args, "--app-dir", str(folder)], elsewhere, _env(elsewhere))
    assert "open http://127.0.0.1:" in said, said

    missing = _run_until_started([*args, "--app-dir", str(folder / "nope")], elsewhere,
                                 _env(elsewhere))
    assert "--app-dir" in missing and "no such folder" in missing, missing
    assert "Traceback" not in missing
