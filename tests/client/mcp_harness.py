"""`signoff mcp-gateway` as an agent's host starts it, in front of the example payments MCP
server (examples/mcp_payments.py) on the test's payments file, against a real `signoff serve`."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import httpx
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from signoff_client.adapters.mcp_gateway import IDEMPOTENCY_META_KEY

from bot.sandbox import fake_slack
from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments

ARGS: dict[str, Any] = {"order_id": "A-1", "amount": 40.0}
#: The world the example's docstring gates with: the card's preview and the guard.
WORLD = ("--preview", "refund_*=preview_refund", "--guard", "refund_*=check_refund")


def upstream(payments: Payments) -> str:
    return f"{sys.executable} -m examples.mcp_payments serve {payments.path}"


def gateway_argv(url: str, api_key: str, payments: Payments, *options: str) -> list[str]:
    """`python` arguments starting the gateway on the example server, gating `refund_*`."""
    return ["-m", "bot", "mcp-gateway", "--upstream", upstream(payments), "--gate", "refund_*",
            "--url", url, "--api-key", api_key, "--requester", harness.REQUESTER, *options]


def gateway_args(served: harness.Served, payments: Payments, *options: str) -> list[str]:
    return gateway_argv(served.url, served.api_key, payments, *options)


@asynccontextmanager
async def gateway(served: harness.Served, payments: Payments,
                  *options: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with the gateway over stdio, started as an agent's host would."""
    params = StdioServerParameters(command=sys.executable, cwd=str(replicas.REPO),
                                   args=gateway_args(served, payments, *options))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@dataclass
class HttpGateway:
    process: asyncio.subprocess.Process
    url: str

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)


@asynccontextmanager
async def http_gateway_process(served: harness.Served, payments: Payments,
                               *options: str) -> AsyncIterator[HttpGateway]:
    """The gateway as its own process on streamable HTTP, listening."""
    port = replicas.free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, *gateway_args(served, payments, *options), "--http", str(port),
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
        yield HttpGateway(process, f"http://127.0.0.1:{port}/mcp")
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


@asynccontextmanager
async def session_at(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_gateway(served: harness.Served, payments: Payments,
                       *options: str) -> AsyncIterator[ClientSession]:
    """An MCP session with the gateway running as its own process on streamable HTTP."""
    async with http_gateway_process(served, payments, *options) as running, \
            session_at(running.url) as session:
        yield session


def keyed(key: str) -> types.RequestParamsMeta:
    """The ``meta`` of a call the agent names, so that asking again is the same call."""
    return cast(types.RequestParamsMeta, {IDEMPOTENCY_META_KEY: key})


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content
                    if isinstance(block, types.TextContent))


async def settled(task: asyncio.Task[types.CallToolResult]) -> types.CallToolResult:
    return await asyncio.wait_for(task, timeout=60)


async def next_card(served: harness.Served, after: fake_slack.Message) -> fake_slack.Message:
    """The card posted after ``after``: the diff card a changed world brings."""
    async def fresh() -> fake_slack.Message | None:
        card = served.open_card("refund_order")
        return card if card is not None and card.ts != after.ts else None

    return await replicas.until(fresh, timeout=30, what="a new approval card")


async def api_get(served: harness.Served, path: str, **params: str) -> Any:
    async with httpx.AsyncClient(base_url=served.url) as http:
        response = await http.get(f"/api/v1{path}", params=params,
                                  headers={"Authorization": f"Bearer {served.api_key}"})
    assert response.status_code == 200, response.text
    return response.json()


async def calls(served: harness.Served, status: str) -> list[dict[str, Any]]:
    """The key's calls in ``status``, as the API lists them."""
    body = await api_get(served, "/calls", status=status)
    listed: list[dict[str, Any]] = body["calls"] if isinstance(body, dict) else body
    return listed


def said_in_slack(served: harness.Served, *words: str) -> list[str]:
    """Every message (thread replies included) whose text or blocks contain all of ``words``."""
    found = []
    for message in served.cluster.fake.messages():
        shown = f"{message.text}\n{json.dumps(message.blocks, ensure_ascii=False)}"
        if all(word in shown for word in words):
            found.append(shown)
    return found


def ledger(served: harness.Served, run_id: str) -> list[dict[str, Any]]:
    """The run's ledger rows, as `signoff runs show --json` prints them."""
    shown = json.loads(harness.signoff_cli(served.db_url, "runs", "show", run_id, "--json"))
    rows: list[dict[str, Any]] = shown["ledger"]
    return rows


def cards_of_run(served: harness.Served, card: fake_slack.Message) -> list[str]:
    """Every approval card ever posted for ``card``'s run (decided ones too), by ``ts``."""
    run_id = harness.card_run(card)
    return [m.ts for m in served.cluster.fake.messages() if harness.card_run(m) == run_id]
