"""The client in processes of its own: killed mid-execution, and installed alone in a venv."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import venv
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from signoff_client import Signoff

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

# One `signoff serve` for the module; each test's agent has a key of its own, so a test sees
# only its own cards and its own unknown calls.
pytestmark = pytest.mark.asyncio(loop_scope="module")
AGENT = Path(__file__).with_name("standalone_agent.py")
CLIENT_DIR = replicas.REPO / "client"
#: The module's server's execution lease: the crash tests wait this long (and a reaper pass)
#: for a killed agent's claim to run out, not the default minute.
LEASE_SECONDS = 5


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_server(tmp_path_factory: pytest.TempPathFactory
                        ) -> AsyncIterator[harness.Served]:
    tmp = tmp_path_factory.mktemp("server")
    async with harness.served(harness.sqlite_db(tmp), tmp,
                              SIGNOFF_EXECUTION_LEASE_SECONDS=str(LEASE_SECONDS)) as served:
        yield served


def spawn_agent(python: str, served: harness.Served, payments: Payments, run_key: str,
                mode: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [python, str(AGENT), served.url, served.api_key, str(payments.path), run_key, mode],
        stdin=subprocess.DEVNULL, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        cwd=log.parent)


async def exited(proc: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> str:
    for _ in range(int(timeout * 10)):
        if proc.poll() is not None:
            break
        await asyncio.sleep(0.1)
    else:
        proc.kill()
        raise AssertionError(f"the agent did not finish:\n{log.read_text()}")
    output = log.read_text()
    assert proc.returncode == 0, output
    return output


async def killed_after_the_refund(served: harness.Served, payments: Payments, run_key: str,
                                  log: Path) -> None:
    """An agent approved, then SIGKILLed once its refund is written: the call stays executing."""
    agent = spawn_agent(sys.executable, served, payments, run_key, "hang", log)
    try:
        await served.approve(await served.wait_for_card("refund_order"))

        async def refunded() -> list[dict[str, Any]]:
            return payments.refunds()

        await replicas.until(refunded, timeout=30, what="the refund to be written")
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)


@dataclass
class Killed:
    served: harness.Served  #: the module's server, with the agent's own key
    payments: Payments


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def killed(module_server: harness.Served,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, Killed]:
    """Each crash test's agent, killed after its refund, both at the first crash test: the
    leases run out together, not one after the other."""
    agents = {}
    for run_key in ("ticket-kill", "ticket-reconcile"):
        tmp = tmp_path_factory.mktemp(run_key)
        payments = Payments(tmp / "payments.json")
        payments.add_order("A-1", 40.0)
        served = await asyncio.to_thread(module_server.with_own_key, run_key)
        await killed_after_the_refund(served, payments, run_key, tmp / "agent.log")
        agents[run_key] = Killed(served, payments)
    return agents


# These wait for the lease to run out, then for the reaper.
@pytest.mark.timeout(240)
async def test_restart__agent_killed_after_the_refund_is_reconciled_not_rerun(
        killed: dict[str, Killed]) -> None:
    server, payments = killed["ticket-kill"].served, killed["ticket-kill"].payments
    # The restarted agent asks for the same call in the same run: the lease runs out, the
    # call turns unknown, and its reconcile finds the refund the dead process made.
    async with Signoff(server.url, api_key=server.api_key) as so:
        run = await so.start_run(requester=harness.REQUESTER,
                                 title="Refund from a standalone agent",
                                 idempotency_key="ticket-kill", requires=["refund_order"])
        result = await asyncio.wait_for(run.call(
            "refund_order", {"order_id": "A-1", "amount": 40.0},
            execute=payments.refund_order, preview=payments.render,
            guard=payments.check, reconcile=payments.find), timeout=150)

    assert payments.refunds() == [result], "the refund ran once, and was found, not redone"


@pytest.mark.slow
async def test_fresh_venv__only_signoff_client_installed_does_a_round(
        module_server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    server = await asyncio.to_thread(module_server.with_own_key, "venv")
    env_dir = tmp_path / "venv"
    await asyncio.to_thread(venv.create, env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    install = await asyncio.to_thread(
        subprocess.run, [python, "-m", "pip", "install", "--quiet", str(CLIENT_DIR)],
        capture_output=True, text=True, timeout=300, check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    probe = await asyncio.to_thread(
        subprocess.run, [python, "-c", "import importlib.util as u; print([m for m in "
                         "('bot', 'resume', 'store', 'slack_sdk', 'sqlalchemy') "
                         "if u.find_spec(m)])"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr

    log = tmp_path / "venv-agent.log"
    agent = spawn_agent(python, server, payments, "ticket-venv", "round", log)
    try:
        await server.approve(await server.wait_for_card("refund_order"))
        output = await exited(agent, log)
    finally:
        if agent.poll() is None:
            agent.kill()
    result = json.loads(output.strip().splitlines()[-1])
    assert payments.refunds() == [result]


@pytest.mark.timeout(240)
async def test_reconcile__settles_the_keys_unknown_call_with_the_tools_reconcile(
        killed: dict[str, Killed]) -> None:
    server, payments = killed["ticket-reconcile"].served, killed["ticket-reconcile"].payments
    async with Signoff(server.url, api_key=server.api_key) as so:
        async def unknown() -> list[Any]:
            return await so.unknown_calls()

        (stuck,) = await replicas.until(unknown, timeout=150, what="the call to turn unknown")
        assert stuck.tool == "refund_order"
        left = await so.reconcile({"refund_order": payments.find})
        assert [c.status for c in left] == ["succeeded"]
        assert await so.unknown_calls() == []
    assert len(payments.refunds()) == 1
