"""A small payments MCP server to put behind ``signoff mcp-gateway``, and a way to call it.

The server (``python -m examples.mcp_payments serve PAYMENTS_JSON``, MCP over stdio) keeps
orders and refunds in a JSON file, so you can watch what ran and change the world by hand:

- ``refund_order(order_id, amount)`` writes a refund (the tool to gate). It answers with a
  tool error, writing nothing, when the amount is more than is left to refund.
- ``preview_refund(order_id, amount)`` only reads: the order's total, what was refunded, and
  the order's note if it has one.
- ``check_refund(order_id, amount)`` only reads: not ok when the order is on hold or the
  amount is more than is left.
- ``lookup(order_id)`` only reads: the order as stored.

Against the sandbox::

    DATABASE_URL=sqlite+aiosqlite:///./signoff-sandbox.db .venv/bin/signoff db upgrade
    DATABASE_URL=sqlite+aiosqlite:///./signoff-sandbox.db \\
        .venv/bin/signoff api-keys create mcp-payments --tools 'refund_*'   # prints so_...
    .venv/bin/signoff sandbox          # in another terminal
    SIGNOFF_URL=http://127.0.0.1:3000 SIGNOFF_API_KEY=so_... SIGNOFF_REQUESTER=U0RILEY \\
        .venv/bin/signoff mcp-gateway --http 8765 --gate 'refund_*' \\
        --upstream '.venv/bin/python -m examples.mcp_payments serve mcp-payments.json' \\
        --preview 'refund_*=preview_refund' --guard 'refund_*=check_refund'
    .venv/bin/python -m examples.mcp_payments ask http://127.0.0.1:8765/mcp A-1 40

``ask`` is an MCP client standing in for an agent: it calls ``refund_order`` through the
gateway and prints what the agent would read. The card appears on the sandbox page for Riley
(``U0RILEY``): approve it and the refund runs once; decline it and the answer is a tool error
with the reason. Change the order's ``total`` in ``mcp-payments.json`` before approving and
signoff posts a diff card instead of refunding; set ``"hold": true`` and the approval is
blocked. Any MCP host (an IDE, a desktop assistant) can start the gateway the same way, over
stdio without ``--http``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

DEMO_ORDERS = {"A-1": {"total": 40.0, "hold": False}, "B-7": {"total": 120.0, "hold": False}}

server = MCPServer("payments")
payments_file = Path("mcp-payments.json")


def _load() -> dict[str, Any]:
    if not payments_file.exists():
        payments_file.write_text(json.dumps({"orders": DEMO_ORDERS, "refunds": []}, indent=2))
    data: dict[str, Any] = json.loads(payments_file.read_text())
    return data


def _order(data: dict[str, Any], order_id: str) -> dict[str, Any]:
    order: dict[str, Any] | None = data["orders"].get(order_id)
    if order is None:
        raise ToolError(f"there is no order {order_id!r}")
    return order


def _refunded(data: dict[str, Any], order_id: str) -> float:
    return sum(float(r["amount"]) for r in data["refunds"] if r["order_id"] == order_id)


def _left(data: dict[str, Any], order_id: str) -> float:
    return float(_order(data, order_id)["total"]) - _refunded(data, order_id)


@server.tool()
def refund_order(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    data = _load()
    left = _left(data, order_id)
    if amount > left:
        raise ToolError(f"refund of {amount:.2f} is more than the {left:.2f} left on {order_id}")
    refund = {"id": f"R-{len(data['refunds']) + 1}", "order_id": order_id, "amount": amount,
              "key": "mcp"}
    data["refunds"].append(refund)
    tmp = payments_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(payments_file)
    return f"refunded {amount} on {order_id} as {refund['id']}"


@server.tool()
def preview_refund(order_id: str, amount: float) -> dict[str, str]:
    """What a refund would change: the order's total, what was refunded already, its note."""
    data = _load()
    order = _order(data, order_id)
    shown = {"Order total": f"{float(order['total']):.2f}",
             "Already refunded": f"{_refunded(data, order_id):.2f}"}
    if order.get("note"):
        shown["Note"] = str(order["note"])
    return shown


@server.tool()
def check_refund(order_id: str, amount: float) -> dict[str, Any]:
    """Whether the refund may run now: not on an order on hold, nor past what is left."""
    data = _load()
    if _order(data, order_id)["hold"]:
        raise ToolError(f"order {order_id} is on hold")
    left = _left(data, order_id)
    if amount > left:
        return {"ok": False, "message": f"only {left:.2f} is left to refund on {order_id}"}
    return {"ok": True}


@server.tool()
def lookup(order_id: str) -> str:
    """An order as stored: its total and whether it is on hold."""
    return json.dumps(_order(_load(), order_id))


async def ask(url: str, order_id: str, amount: float) -> int:
    """Call ``refund_order`` through the gateway at ``url``, as an agent would."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("refund_order",
                                          {"order_id": order_id, "amount": amount})
    text = " ".join(getattr(block, "text", "") for block in result.content)
    print(("tool error: " if result.is_error else "") + text)
    return 1 if result.is_error else 0


def main(argv: list[str]) -> int:
    global payments_file
    if len(argv) == 2 and argv[0] == "serve":
        payments_file = Path(argv[1])
        server.run()
        return 0
    if len(argv) == 4 and argv[0] == "ask":
        return asyncio.run(ask(argv[1], argv[2], float(argv[3])))
    print("usage: python -m examples.mcp_payments serve PAYMENTS_JSON\n"
          "       python -m examples.mcp_payments ask GATEWAY_URL ORDER_ID AMOUNT",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
