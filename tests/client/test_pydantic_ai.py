"""The Pydantic AI adapter's own way with a changed preview: it pauses again on the diff card.
(What it shares with the other adapters is in test_agent_adapters.py.)"""

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


async def test_pydantic_ai__approval_of_an_old_preview_gets_changed_and_a_fresh_decision(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = framework_agents.pydantic_ai_agent(payments, FilePauses(tmp_path / "paused"))
    async with harness.started_run(server, "Pydantic AI changed") as run:
        first = await harness.paused_then_changed(server, run, gate, agent, payments, 20.0)

        again = await asyncio.wait_for(gate.resume(agent, run), timeout=60)
        assert isinstance(again, Paused), "the changed details pause the agent on a diff card"
        assert payments.refunds() == []

        await server.approve(await harness.diff_card(server, first))
        done = await asyncio.wait_for(gate.resume(agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(done, Paused) and refund["id"] in done.output
