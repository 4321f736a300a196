"""`signoff mcp-gateway` in front of a real upstream MCP server, against a real `signoff
serve`, driven by the mcp SDK's own client: what ran upstream, and what the agent read."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

UPSTREAM = Path(__file__).with_name("mcp_upstream.py")
ARGS = {"order_id": "A-1", "amount": 40.0}


def gateway_args(served: harness.Served, payments: Payments) -> list[str]:
    upstream = f"{sys.executable} {UPSTREAM} {payments.path}"
    return ["-m", "bot", "mcp-gateway", "--upstream", upstream, "--gate", "refund_*",
            "--url", served.url, "--api-key", served.api_key, "--requester", harness.REQUESTER]


@asynccontextmanager
async def gateway(served: harness.Served, payments: Payments,
                  *options: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with the gateway, started as an agent's host would start it."""
    params = StdioServerParameters(command=sys.executable, cwd=str(replicas.REPO),
                                   args=[*gateway_args(served, payments), *options])
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


async def test_gateway__expired_call_is_a_tool_error_and_nothing_runs(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, "--ttl-minutes", "0.05") as session:
        result = await settled(asyncio.create_task(session.call_tool("refund_order", ARGS)))

    assert result.is_error is True
    assert "expired" in text_of(result)
    assert payments.refunds() == []


async def test_gateway__ungated_tool_passes_through_without_a_card(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        result = await session.call_tool("lookup", {"order_id": "A-1"})

    found: dict[str, Any] = json.loads(text_of(result))
    assert found == {"total": 40.0, "hold": False}
    assert server.cards() == []


@asynccontextmanager
async def http_gateway(served: harness.Served,
                       payments: Payments) -> AsyncIterator[ClientSession]:
    """The gateway as its own process on streamable HTTP, and an MCP session with it."""
    port = replicas.free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, *gateway_args(served, payments), "--http", str(port),
        cwd=replicas.REPO)
    try:
        async def listening() -> bool:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.close()
            return True

        await replicas.until(listening, timeout=30, what="the gateway listening on HTTP")
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session
    finally:
        process.terminate()
        await process.wait()


async def test_gateway_over_http__approved_once_and_declined_never(
        server: harness.Served, payments: Payments) -> None:
    async with http_gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.approve(await server.wait_for_card("refund_order"))
        approved = await settled(task)
        again = asyncio.create_task(session.call_tool("refund_order",
                                                      {"order_id": "A-1", "amount": 5.0}))
        await server.decline(await server.wait_for_card("5.0"), "enough refunds")
        declined = await settled(again)

    (refund,) = payments.refunds()
    assert refund["amount"] == 40.0 and approved.is_error is not True
    assert text_of(approved) == f"refunded 40.0 on A-1 as {refund['id']}"
    assert declined.is_error is True and "'enough refunds'" in text_of(declined)


def test_gateway__without_an_api_key_says_so_and_starts_nothing(
        payments: Payments, tmp_path: Path) -> None:
    started = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "mcp-gateway", "--upstream", f"touch {started}",
         "--gate", "*", "--url", "http://127.0.0.1:9", "--requester", harness.REQUESTER],
        cwd=replicas.REPO, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2, done
    assert done.stderr.strip() == "error: --api-key (or SIGNOFF_API_KEY) is required"
    assert not started.exists()
