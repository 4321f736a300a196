"""A small upstream MCP server for the gateway's tests: `refund_order` writes refunds to
the test's payments file (so the test counts what really ran), `lookup` only reads.

Run as ``python tests/client/mcp_upstream.py PAYMENTS_JSON``; it speaks MCP over stdio.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

PAYMENTS = Path(sys.argv[1])
server = MCPServer("payments")


def _load() -> dict[str, list[dict[str, object]]]:
    data: dict[str, list[dict[str, object]]] = json.loads(PAYMENTS.read_text())
    return data


@server.tool()
def refund_order(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    data = _load()
    refund = {"id": f"R-{len(data['refunds']) + 1}", "order_id": order_id, "amount": amount,
              "key": "mcp"}
    data["refunds"].append(refund)
    PAYMENTS.write_text(json.dumps(data))
    return f"refunded {amount} on {order_id} as {refund['id']}"


@server.tool()
def lookup(order_id: str) -> str:
    """What an order's total is."""
    order = json.loads(PAYMENTS.read_text())["orders"].get(order_id)
    return json.dumps(order)


if __name__ == "__main__":
    server.run()
