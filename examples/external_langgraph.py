"""A LangGraph graph whose refund node asks signoff first (signoff-client[langgraph]).

The node calls ``gate.call``: the first time through it interrupts the graph (the SQLite
checkpointer ``./refunds-graph.db`` keeps the thread, ``./paused/`` the pause) and this
process exits; once a person decides, ``examples/worker.py``'s resume worker resumes the
thread with ``Command(resume=...)`` and the refund runs once, under signoff's execution claim,
however often LangGraph re-runs the node. Run it against the sandbox as
``examples/external_refunds.py`` says (same key), with::

    export SIGNOFF_URL=http://127.0.0.1:<bot port> SIGNOFF_API_KEY=so_...
    .venv/bin/python -m examples.external_langgraph      # pauses, prints the run, exits
    .venv/bin/signoff-worker examples.worker:worker      # resumes it once the card is decided

It calls only ``gate.start``: ``gate.run`` here would resume the pause in this process while the
worker, which watches ``./paused/``, resumes it too (every ungated node would run twice).
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from signoff_client import NotApproved
from signoff_client.adapters.langgraph import LangGraphGate
from signoff_client.adapters.pauses import FilePauses

from examples.external_refunds import (
    check_refund,
    find_refund,
    refund_order,
    render_refund,
    start_for_worker,
)

# The pause records are what a resume worker (examples/worker.py) finds the waiting threads by.
gate = LangGraphGate(FilePauses("paused"), name="refunds-langgraph")
CHECKPOINTS = "refunds-graph.db"


class Ticket(TypedDict, total=False):
    order_id: str
    outcome: str


async def refund_node(state: Ticket) -> Ticket:  # LangGraph names it `state`
    try:
        refund = await gate.call("refund_order", {"order_id": state["order_id"], "amount": 40.0},
                                 execute=refund_order, preview=render_refund,
                                 guard=check_refund, reconcile=find_refund)
    except NotApproved as refusal:
        return {"outcome": f"No refund: {refusal}"}
    return {"outcome": f"Refunded ${refund['amount']:.2f} ({refund['id']})."}


def graph_builder() -> StateGraph[Ticket]:
    builder: StateGraph[Ticket] = StateGraph(Ticket)
    builder.add_node("refund", refund_node)
    builder.add_edge(START, "refund")
    builder.add_edge("refund", END)
    return builder


async def main() -> None:
    async with AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as saver:
        graph = graph_builder().compile(checkpointer=saver)
        # The thread is the run's, so the worker finds it by the run.
        await start_for_worker(
            "langgraph", lambda run: gate.start(graph, run, {"order_id": "A-1"},
                                                {"configurable": {"thread_id": run.id}}),
            answer=lambda state: str(state["outcome"]))


if __name__ == "__main__":
    asyncio.run(main())
