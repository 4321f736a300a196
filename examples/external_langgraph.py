"""A LangGraph graph whose refund node asks signoff first (signoff-client[langgraph]).

The node calls ``gate.call``: the first time through it interrupts the graph (the SQLite
checkpointer ``./refunds-graph.db`` keeps the thread); once a person decides, the thread is
resumed with ``Command(resume=...)`` and the refund runs once, under signoff's execution claim,
however often LangGraph re-runs the node. Run it against the sandbox as
``examples/external_refunds.py`` says (same key), with::

    SIGNOFF_URL=http://127.0.0.1:<bot port> SIGNOFF_API_KEY=so_... \\
        .venv/bin/python -m examples.external_langgraph

This one waits in-process with ``gate.run``. Never do that on a pause store a resume worker
watches: both would resume the pause, running the model and every ungated tool twice. With a
worker, call ``gate.start`` and let the worker resume (``examples/worker.py``).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from signoff_client import NotApproved, Signoff
from signoff_client.adapters.langgraph import LangGraphGate
from signoff_client.adapters.pauses import FilePauses

from examples.external_refunds import check_refund, find_refund, refund_order, render_refund

# The pause records are what a resume worker (examples/worker.py) finds the waiting threads by.
gate = LangGraphGate(FilePauses("paused"), name="refunds-langgraph")
CHECKPOINTS = "refunds-graph.db"


class Ticket(TypedDict, total=False):
    order_id: str
    outcome: str


async def refund_node(ticket: Ticket) -> Ticket:
    try:
        refund = await gate.call("refund_order", {"order_id": ticket["order_id"], "amount": 40.0},
                                 execute=refund_order, preview=render_refund,
                                 guard=check_refund, reconcile=find_refund)
    except NotApproved as refusal:
        return {"outcome": f"No refund: {refusal}"}
    return {"outcome": f"Refunded ${refund['amount']:.2f} ({refund['id']})."}


def graph_builder() -> StateGraph[Ticket]:
    builder = StateGraph(Ticket)
    # langgraph's add_node overloads do not match an async node on a total=False TypedDict
    # under mypy, though LangGraph runs it as documented.
    builder.add_node("refund", refund_node)  # type: ignore[call-overload]
    builder.add_edge(START, "refund")
    builder.add_edge("refund", END)
    return builder


async def main() -> None:
    builder = graph_builder()
    config: dict[str, Any] = {"configurable": {"thread_id": "ticket-4411"}}
    url = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:3000")
    async with AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as saver, \
            Signoff(url, api_key=os.environ["SIGNOFF_API_KEY"]) as so, so.run(
                requester=os.environ.get("SIGNOFF_REQUESTER", "U0RILEY"),
                title="Refund for ticket 4411 (LangGraph)", idempotency_key="lg-ticket-4411",
                requires=["refund_order"]) as run:
        final = await gate.run(builder.compile(checkpointer=saver), run,
                               {"order_id": "A-1"}, config)
        run.answer = str(final["outcome"])
        print(run.answer)


if __name__ == "__main__":
    asyncio.run(main())
