"""The worker tests' processes: an agent that pauses and exits, and `signoff-worker` itself.

Each is a real subprocess; output goes to a log file (never a pipe a full buffer could block).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from signoff_client import Signoff

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

WORKER_COMMAND = str(Path(sys.executable).with_name("signoff-worker"))
TARGET = "tests.client.worker_agents:worker"
WHSEC_PATTERN = re.compile(r"\bwhsec_[A-Za-z0-9+/=]+")


def environment(served: harness.Served, workdir: Path, api_key: str | None = None,
                **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "SIGNOFF_"))}
    env.update({"SIGNOFF_URL": served.url, "SIGNOFF_API_KEY": api_key or served.api_key,
                "WORKER_TEST_DIR": str(workdir), "PYTHONUNBUFFERED": "1", **settings})
    return env


async def start_agent(env: dict[str, str], adapter: str, run_key: str) -> dict[str, Any]:
    """Run the agent to its pause; it must exit 0. What it printed: run id and call ids."""
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "tests.client.worker_agents", adapter, run_key],
        cwd=replicas.REPO, env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, f"the agent failed:\n{done.stdout}\n{done.stderr}"
    printed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return printed


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, env: dict[str, str], log: Path, *args: str, cwd: Path = replicas.REPO,
              target: str = TARGET) -> WorkerProcess:
        proc = subprocess.Popen([WORKER_COMMAND, target, *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log.open("ab"),
                                stderr=subprocess.STDOUT)
        return cls(proc, log)

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    async def logged(self, text: str, timeout: float = 60, times: int = 1) -> str:
        """Until ``text`` is in the log ``times`` times; the log."""
        async def found() -> str | None:
            seen = self.output().count(text) >= times
            assert self.proc.poll() is None or seen, \
                f"the worker exited ({self.proc.returncode}):\n{self.output()}"
            return self.output() if seen else None

        try:
            return await replicas.until(found, timeout=timeout,
                                        what=f"{text!r} {times}x in the worker's log")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{self.output()}") from None

    async def stop(self) -> int:
        """SIGTERM, as a process manager stops it; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, 30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


async def cleared(pause: Path, worker: WorkerProcess, timeout: float = 60) -> None:
    """Until the worker has resumed the run to its end (its pause record is gone)."""
    async def gone() -> bool | None:
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.output()}"
        return True if not pause.exists() else None

    await replicas.until(gone, timeout=timeout,
                         what=f"the worker to resume the run of {pause.name}")


def webhook_key(served: harness.Served, url: str) -> tuple[str, str]:
    """A key whose webhook is ``url``, created with the real command: (key, whsec secret)."""
    printed = harness.signoff_cli(served.db_url, "api-keys", "create",
                                  f"worker-hooks-{replicas.free_port()}", "--tools", "*",
                                  "--webhook", url)
    key, secret = harness.KEY_PATTERN.search(printed), WHSEC_PATTERN.search(printed)
    assert key and secret, f"no key or secret in: {printed!r}"
    return key.group(0), secret.group(0)


#: Long enough that only a long-poll or a webhook can wake the worker within a test.
NO_RESCAN = "600"


@dataclass
class Scene:
    """One agent that paused and exited, and the worker process that resumes it."""

    served: harness.Served
    env: dict[str, str]
    paused: dict[str, Any]
    worker: WorkerProcess
    workdir: Path

    @property
    def run_id(self) -> str:
        return str(self.paused["run_id"])

    @property
    def pause(self) -> Path:
        return self.workdir / "paused" / f"{self.run_id}.json"

    def restart(self) -> None:
        self.worker.kill()
        self.worker = WorkerProcess.start(self.env, self.workdir / "worker.log")

    async def card(self) -> Any:
        return await self.served.wait_for_card("refund_order", self.run_id)

    async def resumed(self) -> None:
        await cleared(self.pause, self.worker)

    async def answered_with_one_refund(self, payments: Payments) -> None:
        """Until the worker resumed the run: it answered, and the refund ran once."""
        await self.resumed()
        info = await self.run_info()
        assert len(payments.refunds()) == 1
        assert info["state"] == "answered"

    async def run_info(self) -> dict[str, Any]:
        async with Signoff(self.served.url, api_key=self.env["SIGNOFF_API_KEY"]) as so:
            _, info = await so.api.request("GET", f"/runs/{self.run_id}")
        assert isinstance(info, dict)
        return info


@asynccontextmanager
async def paused_agent_and_worker(served: harness.Served, workdir: Path, adapter: str,
                                  run_key: str, **settings: str) -> AsyncIterator[Scene]:
    """The agent run to its pause (it exits), then the worker started, registering only that
    adapter and long-polling (no rescan within the test); killed at the end."""
    env = environment(served, workdir, WORKER_RESCAN_SECONDS=NO_RESCAN,
                      WORKER_ADAPTERS=adapter, **settings)
    paused = await start_agent(env, adapter, run_key)
    scene = Scene(served, env, paused, WorkerProcess.start(env, workdir / "worker.log"),
                  workdir)
    try:
        await scene.worker.logged("worker started")
        yield scene
    finally:
        scene.worker.kill()
