"""`signoff mcp-gateway` in front of a real upstream MCP server, against a real `signoff
serve`, driven by the mcp SDK's own client: what ran upstream, and what the agent read."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

UPSTREAM = Path(__file__).with_name("mcp_upstream.py")
ARGS = {"order_id": "A-1", "amount": 40.0}


@asynccontextmanager
async def gateway(served: harness.Served, payments: Payments) -> AsyncIterator[ClientSession]:
    """An MCP client session with the gateway, started as an agent's host would start it."""
    upstream = f"{sys.executable} {UPSTREAM} {payments.path}"
    params = StdioServerParameters(
        command=sys.executable, cwd=str(replicas.REPO),
        args=["-m", "bot", "mcp-gateway", "--upstream", upstream, "--gate", "refund_*",
              "--url", served.url, "--api-key", served.api_key,
              "--requester", harness.REQUESTER])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content
                    if isinstance(block, types.TextContent))


async def settled(task: asyncio.Task[types.CallToolResult]) -> types.CallToolResult:
    return await asyncio.wait_for(task, timeout=60)


async def test_gateway__lists_the_upstream_tools(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        listed = await session.list_tools()

    assert sorted(tool.name for tool in listed.tools) == ["lookup", "refund_order"]


async def test_gateway__approved_call_runs_upstream_once_after_the_card(
        server: harness.Served, payments: Payments) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS,
                                                     progress_callback=on_progress))
        card = await server.wait_for_card("refund_order")
        assert payments.refunds() == [], "nothing may run before the approval"
        card_text = json.dumps(card.blocks)
        assert "A-1" in card_text and "40.0" in card_text, card_text
        await server.approve(card)
        result = await settled(task)

    (refund,) = payments.refunds()
    assert refund["order_id"] == "A-1" and refund["amount"] == 40.0
    assert result.is_error is not True, result
    assert text_of(result) == f"refunded 40.0 on A-1 as {refund['id']}"
    assert progress, "the gateway sends progress while it waits"


async def test_gateway__declined_call_is_a_tool_error_with_the_reason(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.decline(await server.wait_for_card("refund_order"), "over the limit")
        result = await settled(task)

    assert result.is_error is True
    assert "declined" in text_of(result) and "'over the limit'" in text_of(result)
    assert payments.refunds() == []


async def test_gateway__ungated_tool_passes_through_without_a_card(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        result = await session.call_tool("lookup", {"order_id": "A-1"})

    found: dict[str, Any] = json.loads(text_of(result))
    assert found == {"total": 40.0, "hold": False}
    assert server.cards() == []
