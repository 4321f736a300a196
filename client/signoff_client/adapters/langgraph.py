"""LangGraph: ``interrupt()`` for the pause, signoff for the decision, the claim and the ledger.

Call ``gate.call(...)`` inside a node instead of running a sensitive tool directly. The
first time through, it asks signoff and interrupts the graph with the call (LangGraph's own
pause; the checkpointer keeps the thread, so the process may exit). ``gate.resume`` waits
for the decision and resumes the thread with ``Command(resume=...)``. LangGraph then runs
the node again from its start, as it always does; ``gate.call`` finds the call decided and
runs the tool only through signoff's execution claim, so it runs once however often the node
re-executes, and an approval of details that have since changed is answered ``changed``
(the call then waits for the fresh decision on the diff card). A decline, an expiry or a
block raises ``Declined``, ``Expired`` or ``Blocked`` in the node.

    gate = LangGraphGate()

    async def refund_node(state):
        try:
            refund = await gate.call("refund_order", {"order_id": ..., "amount": ...},
                                     execute=refund_order, preview=render_refund)
        except NotApproved as refusal:
            return {"outcome": str(refusal)}
        return {"outcome": refund["id"]}

    async with so.run(requester="U123", title="Refunds") as run:
        result = await gate.run(graph, run, {"order_id": "A-1"}, config)
"""

from __future__ import annotations

from typing import Any

from langgraph.types import Command, interrupt

from signoff_client import errors
from signoff_client.context import current_run
from signoff_client.models import JsonObject
from signoff_client.rounds import Ask, Round, decision
from signoff_client.runs import Run, default_call_id
from signoff_client.tools import EvidenceFn, ExecuteFn, GuardFn, PreviewFn, ReconcileFn, Tool

#: The key of the interrupt payload that names the signoff call.
PAYLOAD_KEY = "signoff_call"


class LangGraphGate:
    """Gated tool calls inside LangGraph nodes, and resuming threads on signoff's decisions."""

    async def call(self, tool: str, args: JsonObject, *, execute: ExecuteFn,
                   call_id: str | None = None, preview: PreviewFn | None = None,
                   guard: GuardFn | None = None, reconcile: ReconcileFn | None = None,
                   evidence: EvidenceFn | None = None) -> Any:
        """Inside a node: interrupt for approval the first time; afterwards run it once."""
        run = current_run.get()
        if run is None:
            raise errors.NoRun(f"{tool} needs approval: run the graph through the gate")
        spec = Tool(name=tool, execute=execute, preview=preview, guard=guard,
                    reconcile=reconcile, evidence=evidence)
        ask = Ask(run_id=run.id, call_id=call_id or default_call_id(tool, args), tool=spec,
                  args=dict(args))
        rnd = Round(run.api, ask)
        await rnd.request()  # the same call_id again is the same call
        interrupt({PAYLOAD_KEY: ask.call_id, "run_id": run.id, "tool": tool, "args": ask.args})
        return await rnd.perform(rejoin=True)

    async def run(self, graph: Any, run: Run, graph_input: Any,
                  config: dict[str, Any]) -> Any:
        """Invoke the graph on ``config``'s thread and resume it on each decision until it
        ends; returns the graph's final state."""
        token = current_run.set(run)
        try:
            state = await graph.ainvoke(graph_input, config)
            while _pending_calls(state):
                state = await self.resume(graph, run, config, state)
            return state
        finally:
            current_run.reset(token)

    async def resume(self, graph: Any, run: Run, config: dict[str, Any], state: Any) -> Any:
        """Wait for the decisions on the interrupted calls, then ``Command(resume=...)``."""
        statuses = {}
        for call_id in _pending_calls(state):
            statuses[call_id] = (await decision(run.api, run.id, call_id)).status.value
        token = current_run.set(run)
        try:
            return await graph.ainvoke(Command(resume=statuses), config)
        finally:
            current_run.reset(token)


def _pending_calls(state: Any) -> list[str]:
    interrupts = state.get("__interrupt__", []) if isinstance(state, dict) else []
    return [i.value[PAYLOAD_KEY] for i in interrupts
            if isinstance(i.value, dict) and PAYLOAD_KEY in i.value]
