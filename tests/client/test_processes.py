"""The client in processes of its own: killed mid-execution, and installed alone in a venv."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
from signoff_client import Signoff

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

AGENT = Path(__file__).with_name("standalone_agent.py")
CLIENT_DIR = replicas.REPO / "client"


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


# The server's execution lease is 60 s: these wait for it to run out, then for the reaper.
@pytest.mark.timeout(240)
async def test_restart__agent_killed_after_the_refund_is_reconciled_not_rerun(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    agent = spawn_agent(sys.executable, server, payments, "ticket-kill", "hang",
                        tmp_path / "agent.log")
    try:
        await server.approve(await server.wait_for_card("refund_order"))

        async def refunded() -> list[dict[str, Any]]:
            return payments.refunds()

        await replicas.until(refunded, timeout=30, what="the refund to be written")
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)

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
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
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
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    agent = spawn_agent(sys.executable, server, payments, "ticket-reconcile", "hang",
                        tmp_path / "agent.log")
    try:
        await server.approve(await server.wait_for_card("refund_order"))

        async def refunded() -> list[dict[str, Any]]:
            return payments.refunds()

        await replicas.until(refunded, timeout=30, what="the refund to be written")
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)

    async with Signoff(server.url, api_key=server.api_key) as so:
        async def unknown() -> list[Any]:
            return await so.unknown_calls()

        (stuck,) = await replicas.until(unknown, timeout=150, what="the call to turn unknown")
        assert stuck.tool == "refund_order"
        left = await so.reconcile({"refund_order": payments.find})
        assert [c.status for c in left] == ["succeeded"]
        assert await so.unknown_calls() == []
    assert len(payments.refunds()) == 1
