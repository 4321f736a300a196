"""The Pydantic AI adapter's own way with a changed preview: it pauses again on the diff card.
(What it shares with the other adapters is in test_agent_adapters.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from signoff_client.adapters.pauses import FilePauses, Paused

from tests.client import framework_agents, harness
from tests.client.refunds import Payments


async def test_pydantic_ai__approval_of_an_old_preview_gets_changed_and_a_fresh_decision(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, agent = framework_agents.pydantic_ai_agent(payments, FilePauses(tmp_path / "paused"))
    async with harness.started_run(server, "Pydantic AI changed") as run:
        assert isinstance(await gate.start(agent, run, "refund order A-1"), Paused)
        first = await server.wait_for_card("refund_order")
        payments.set_total("A-1", 20.0)
        await server.approve(first)

        again = await asyncio.wait_for(gate.resume(agent, run), timeout=60)
        assert isinstance(again, Paused), "the changed details pause the agent on a diff card"
        assert payments.refunds() == []

        await server.approve(await harness.diff_card(server, first))
        done = await asyncio.wait_for(gate.resume(agent, run), timeout=60)

    (refund,) = payments.refunds()
    assert not isinstance(done, Paused) and refund["id"] in done.output
