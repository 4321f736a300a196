"""The OpenAI Agents SDK adapter's own way with a changed preview: the resumed tool waits for
the fresh decision. (What it shares with the other adapters is in test_agent_adapters.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from signoff_client.adapters.pauses import FilePauses, Paused

from tests.client import framework_agents, harness
from tests.client.refunds import Payments

# One `signoff serve` for the module: each test finds its own run's cards by the run's id.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="server")
def shared_server(module_server: harness.Served) -> harness.Served:
    return module_server


async def test_openai_agents__approval_of_an_old_preview_gets_changed_then_runs_once(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = framework_agents.openai_agent(payments, FilePauses(tmp_path / "paused"))
    async with harness.started_run(server, "Agents SDK changed") as run:
        first = await harness.paused_then_changed(server, run, gate, agent, payments, 15.0)
        resumed = asyncio.create_task(gate.resume(agent, run))

        second = await harness.diff_card(server, first)
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await server.approve(second)
        result = await asyncio.wait_for(resumed, timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(result, Paused) and refund["id"] in result.final_output
