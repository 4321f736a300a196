"""A plain-Python refunds agent that lives outside signoff and asks it before each refund.

Nothing here is a signoff App: no Slack, no database driver, only ``signoff_client``. The
payments system is a JSON file (``./refunds-demo.json``) so you can watch what ran.

Against the sandbox::

    DATABASE_URL=sqlite+aiosqlite:///./signoff-sandbox.db .venv/bin/signoff db upgrade
    DATABASE_URL=sqlite+aiosqlite:///./signoff-sandbox.db \\
        .venv/bin/signoff api-keys create refunds-agent --tools 'refund_*'   # prints so_...
    .venv/bin/signoff sandbox          # in another terminal
    SIGNOFF_URL=http://127.0.0.1:3000 SIGNOFF_API_KEY=so_... \\
        .venv/bin/python -m examples.external_refunds

The sandbox serves the API on the page's port too (its banner's ``API`` line).

The card appears on the sandbox page for Riley (``U0RILEY``, the requester). Approve it and
the refund runs once; decline it and the agent reports the reason. Change the order's total in
``refunds-demo.json`` before approving and signoff posts a diff card instead of refunding. Kill
the agent at any point and start it again: it joins the same run and the same call (the run's
``idempotency_key``), so an approved refund is never paid twice.

The framework examples (``external_pydantic_ai``, ``external_openai_agents``,
``external_langgraph``) share its tools and ``start_for_worker``, which starts their agent
for ``examples/worker.py`` to resume.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from signoff_client import (
    Guard,
    NotApproved,
    Preview,
    Reconciliation,
    Run,
    Signoff,
    current_call,
)
from signoff_client.adapters.pauses import Paused

PAYMENTS = Path(os.environ.get("REFUNDS_DEMO_FILE", "refunds-demo.json"))
ORDERS = {"A-1": {"total": 40.0, "customer": "Henderson", "disputed": False}}


#: A worker resumes several runs at once, each plain tool in a thread of its own: one writer
#: at a time, or two refunds' read-modify-writes would lose one.
_WRITING = threading.RLock()


def load() -> dict[str, Any]:
    with _WRITING:
        if not PAYMENTS.exists():
            _save({"orders": ORDERS, "refunds": []})
    data: dict[str, Any] = json.loads(PAYMENTS.read_text())
    return data


def _save(data: dict[str, Any]) -> None:
    """Replace the file whole, so a reader never sees half of it."""
    partial = PAYMENTS.with_name(f".{PAYMENTS.name}.{threading.get_ident()}")
    partial.write_text(json.dumps(data, indent=2))
    os.replace(partial, PAYMENTS)


def refund_order(order_id: str, amount: float) -> dict[str, Any]:
    """The write that needs a person's approval. Keyed, so a crash can be reconciled."""
    call = current_call()
    with _WRITING:
        data = load()
        refund = {"id": f"re_{len(data['refunds']) + 1}", "order_id": order_id,
                  "amount": amount, "idempotency_key": call.idempotency_key if call else None}
        data["refunds"].append(refund)
        _save(data)
    return refund


def render_refund(args: dict[str, Any]) -> Preview:
    """What the approver sees, rendered from the payments system as it is now."""
    order = load()["orders"][args["order_id"]]
    return Preview(title=f"Refund {order['customer']}",
                   fields=[("Order", args["order_id"]), ("Refund", f"${args['amount']:.2f}"),
                           ("Order total", f"${order['total']:.2f}")])


def check_refund(args: dict[str, Any]) -> Guard:
    order = load()["orders"][args["order_id"]]
    if order["disputed"]:
        return Guard.blocked("disputed", f"order {args['order_id']} is in a dispute")
    if args["amount"] > order["total"]:
        return Guard.blocked("over_total", "the refund is more than the order's total")
    return Guard.passed()


def find_refund(idempotency_key: str, args: dict[str, Any]) -> Reconciliation:
    """After a crash: did the refund with this key happen?"""
    for refund in load()["refunds"]:
        if refund["idempotency_key"] == idempotency_key:
            return Reconciliation.done(refund)
    return Reconciliation.not_done()


async def main() -> None:
    url = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:3000")
    async with Signoff(url, api_key=os.environ["SIGNOFF_API_KEY"]) as so:
        so.requires_approval(preview=render_refund, guard=check_refund,
                             reconcile=find_refund)(refund_order)
        await so.reconcile()  # settle anything a previous crash left unknown
        async with so.run(requester=os.environ.get("SIGNOFF_REQUESTER", "U0RILEY"),
                          title="Refund for ticket 4411", idempotency_key="ticket-4411",
                          requires=["refund_order"]) as run:
            try:
                refund = await run.call("refund_order", {"order_id": "A-1", "amount": 40.0})
                run.answer = f"Refunded ${refund['amount']:.2f} ({refund['id']})."
            except NotApproved as refusal:
                run.answer = f"No refund: {refusal}"
            print(run.answer)


#: What each framework example's agent is asked.
PROMPT = "Refund order A-1 in full."


async def start_for_worker(framework: str, start: Callable[[Run], Awaitable[Any]],
                           answer: Callable[[Any], str]) -> None:
    """Start a framework example's agent in a run of its own with its gate's ``start``: it
    pauses on its card and this process ends; ``examples/worker.py``'s worker resumes it.

    ``start(run)`` is ``gate.start(...)``, never ``gate.run``: the pause goes to ``./paused/``,
    which the worker watches, and two resumers of one pause would run the model and the
    ungated tools twice. ``answer`` turns an agent that ended without a pause into the run's
    answer.
    """
    url = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:3000")
    async with Signoff(url, api_key=os.environ["SIGNOFF_API_KEY"]) as so:
        # start_run, not `async with so.run(...)`: the block's end would end the run.
        run = await so.start_run(requester=os.environ.get("SIGNOFF_REQUESTER", "U0RILEY"),
                                 title=f"Refund for ticket 4411 ({framework}, resumed by a "
                                       "worker)",
                                 # Started again (after a crash, say): the same run, not a
                                 # second request for the same refund.
                                 idempotency_key=f"{framework}-ticket-4411",
                                 requires=["refund_order"])
        outcome = await start(run)
        if isinstance(outcome, Paused):
            print(f"run {run.id} paused on {', '.join(outcome.call_ids)}; the worker resumes it")
        else:
            await run.finish(answer(outcome))  # it needed nobody: it ends here
            print(f"run {run.id} ended without a pause")


if __name__ == "__main__":
    asyncio.run(main())
