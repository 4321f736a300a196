"""The LangGraph helper with a real StateGraph and SQLite checkpointer, against `signoff serve`.
Each test counts refunds in the payments file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from signoff_client import Run
from signoff_client.adapters.langgraph import LangGraphGate

from tests.client import harness
from tests.client.framework_agents import refund_graph
from tests.client.refunds import Payments

# One `signoff serve` for the module: each test finds its own run's cards by the run's id.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="server")
def shared_server(module_server: harness.Served) -> harness.Served:
    return module_server


@asynccontextmanager
async def graph_running(served: harness.Served, payments: Payments, tmp_path: Path, title: str,
                        thread: str) -> AsyncIterator[tuple[Run, asyncio.Task[Any]]]:
    """A new run, and the refund graph running in it on a thread of its own (a task)."""
    gate = LangGraphGate()
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    async with harness.started_run(served, title) as run, \
            refund_graph(payments, tmp_path / "graph.db", gate) as graph:
        yield run, asyncio.create_task(gate.run(graph, run, {"order_id": "A-1"}, config))


async def test_langgraph__the_node_reruns_but_the_tool_runs_once_even_replayed(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    gate, checkpoints = LangGraphGate(), tmp_path / "graph.db"
    config: dict[str, Any] = {"configurable": {"thread_id": "ticket-1"}}
    async with harness.started_run(server, "LangGraph refund") as run:
        async with refund_graph(payments, checkpoints, gate) as graph:
            task = asyncio.create_task(gate.run(graph, run, {"order_id": "A-1"}, config))
            await server.approve(await server.wait_for_card("refund_order", run.id))
            final = await asyncio.wait_for(task, timeout=60)

        # Another process resumes the thread from the interrupted checkpoint again.
        async with refund_graph(payments, checkpoints, gate) as graph:
            paused = [s async for s in graph.aget_state_history(config) if s.interrupts]
            assert paused, "the checkpointer kept the interrupted state"
            replayed = await asyncio.wait_for(
                gate.resume(graph, run, paused[0].config, {"__interrupt__": paused[0].interrupts}),
                timeout=60)

    (refund,) = payments.refunds()
    assert final["outcome"] == replayed["outcome"] == f"refunded {refund['id']}"


async def test_langgraph__declined_reaches_the_node_and_nothing_runs(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with graph_running(server, payments, tmp_path, "LangGraph decline",
                             "ticket-2") as (run, task):
        await server.decline(await server.wait_for_card("refund_order", run.id),
                             "duplicate ticket")
        final = await asyncio.wait_for(task, timeout=60)

    assert final["outcome"].startswith("not refunded:")
    assert "duplicate ticket" in final["outcome"]
    assert payments.refunds() == []


async def test_langgraph__approval_of_an_old_preview_gets_changed_then_runs_once(
        server: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with graph_running(server, payments, tmp_path, "LangGraph changed",
                             "ticket-3") as (run, task):
        first = await server.wait_for_card("refund_order", run.id)
        payments.set_total("A-1", 12.0)
        await server.approve(first)

        second = await harness.diff_card(server, first)
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await server.approve(second)
        final = await asyncio.wait_for(task, timeout=60)

    (refund,) = payments.refunds()
    assert final["outcome"] == f"refunded {refund['id']}"
