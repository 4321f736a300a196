"""An agent process that knows only ``signoff_client``: run by path, in any venv.

    python standalone_agent.py URL KEY PAYMENTS_JSON RUN_KEY MODE

MODE ``round``: refund order A-1 through signoff, print the result as JSON, finish the run.
MODE ``hang``: the same, but the refund, once written, never returns (the test kills us).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from signoff_client import Signoff

# Run by path in a venv holding only signoff_client: its sibling module, not the tests package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
if TYPE_CHECKING:
    from tests.client.refunds import Payments
else:
    from refunds import Payments


async def main(url: str, key: str, payments_path: str, run_key: str, mode: str) -> None:
    payments = Payments(Path(payments_path))

    def refund_then_hang(order_id: str, amount: float) -> dict[str, Any]:
        refund = payments.refund_order(order_id, amount)
        time.sleep(3600)
        return refund

    execute = refund_then_hang if mode == "hang" else payments.refund_order
    async with Signoff(url, api_key=key) as so, so.run(
            requester="U0CLIENT01", title="Refund from a standalone agent",
            idempotency_key=run_key, requires=["refund_order"]) as run:
        result = await run.call("refund_order", {"order_id": "A-1", "amount": 40.0},
                                execute=execute, preview=payments.render,
                                guard=payments.check, reconcile=payments.find)
        run.answer = f"refunded {result['id']}"
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
