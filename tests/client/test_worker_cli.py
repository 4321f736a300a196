"""`signoff-worker` as a command, with no server: its help, its refusals, and what it imports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance import replicas
from tests.client.worker_procs import TARGET, WORKER_COMMAND

#: Registers a LangGraph gate only, then says which heavy modules the process holds.
PROBE = """
import json, sys
from signoff_client.adapters.langgraph import LangGraphGate
from signoff_client.adapters.pauses import FilePauses
from signoff_client.worker import Worker, cli
worker = Worker()
worker.langgraph(LangGraphGate(FilePauses(sys.argv[1]), name="graph"), graph=object())
print(json.dumps(sorted(m for m in ("bot", "store", "resume", "sqlalchemy", "slack_sdk",
                                    "pydantic_ai", "agents", "aiohttp", "standardwebhooks")
                        if m in sys.modules)))
"""


def worker_command(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    return subprocess.run([WORKER_COMMAND, *args], cwd=replicas.REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=False)


def test_worker_cli__help_says_what_it_does() -> None:
    done = worker_command("--help")
    assert done.returncode == 0
    for flag in ("MODULE:ATTR", "--url", "--api-key", "--webhook-port", "--webhook-secret"):
        assert flag in done.stdout


@pytest.mark.parametrize(("args", "env", "said"), [
    ((TARGET,), {"SIGNOFF_API_KEY": "so_x"}, "error: --url (or SIGNOFF_URL) is required"),
    ((TARGET,), {"SIGNOFF_URL": "http://127.0.0.1:9"},
     "error: --api-key (or SIGNOFF_API_KEY) is required"),
    ((TARGET, "--webhook-port", "8123"), {"SIGNOFF_URL": "http://x", "SIGNOFF_API_KEY": "k"},
     "error: --webhook-port needs the key's signing secret: --webhook-secret "
     "(or SIGNOFF_WEBHOOK_SECRET)"),
    (("nocolon",), {"SIGNOFF_URL": "http://x", "SIGNOFF_API_KEY": "k"},
     "error: 'nocolon' is not MODULE:ATTR (e.g. myagents.worker:worker)"),
    (("tests.client.no_such_module:worker",), {"SIGNOFF_URL": "http://x",
                                               "SIGNOFF_API_KEY": "k"},
     "error: cannot import tests.client.no_such_module"),
])
def test_worker_cli__missing_or_bad_config_is_one_error_line_and_exit_2(
        args: tuple[str, ...], env: dict[str, str], said: str) -> None:
    done = worker_command(*args, **env)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(said), done.stderr


def test_worker__imports_no_server_package_and_only_the_registered_framework(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_worker_cli__a_webhook_port_in_use_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = worker_command(TARGET, "--webhook-port", str(port), SIGNOFF_URL="http://x",
                              SIGNOFF_API_KEY="k", WORKER_TEST_DIR=str(tmp_path),
                              WORKER_ADAPTERS="pydantic_ai",
                              SIGNOFF_WEBHOOK_SECRET="whsec_" + "A" * 44)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: --webhook-port {port}: cannot listen on 127.0.0.1"), line
