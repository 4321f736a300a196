"""The OpenAI Agents SDK adapter's own way with a changed preview: the resumed tool waits for
the fresh decision. (What it shares with the other adapters is in test_agent_adapters.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from signoff_client.adapters.pauses import FilePauses, Paused

from tests.client import framework_agents, harness
from tests.client.refunds import Payments


async def test_openai_agents__approval_of_an_old_preview_gets_changed_then_runs_once(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = framework_agents.openai_agent(payments, FilePauses(tmp_path / "paused"))
    async with harness.started_run(server, "Agents SDK changed") as run:
        assert isinstance(await gate.start(agent, run, "refund order A-1"), Paused)
        first = await server.wait_for_card("refund_order")
        payments.set_total("A-1", 15.0)
        await server.approve(first)
        resumed = asyncio.create_task(gate.resume(agent, run))

        second = await harness.diff_card(server, first)
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await server.approve(second)
        result = await asyncio.wait_for(resumed, timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(result, Paused) and refund["id"] in result.final_output
