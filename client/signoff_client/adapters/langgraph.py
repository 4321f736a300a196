"""LangGraph: ``interrupt()`` for the pause, signoff for the decision, the claim and the ledger.

Call ``gate.call(...)`` inside a node instead of running a sensitive tool directly. The
first time through, it asks signoff and interrupts the graph with the call (LangGraph's own
pause; the checkpointer keeps the thread, so the process may exit: ``gate.start`` returns
``Paused``, and with a pauses store the thread is recorded for a resume worker).
``gate.resume`` waits for the decision and resumes the thread with ``Command(resume=...)``.
LangGraph then runs the node again from its start, as it always does; ``gate.call`` finds the
call decided and runs the tool only through signoff's execution claim, so it runs once however
often the node re-executes, and an approval of details that have since changed is answered
``changed`` (the call then waits for the fresh decision on the diff card). A decline, an
expiry or a block raises ``Declined``, ``Expired`` or ``Blocked`` in the node.

    gate = LangGraphGate(FilePauses("./paused"), name="refunds")   # pauses: for a worker

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
from signoff_client.adapters.pauses import Paused as Paused
from signoff_client.adapters.pauses import Pauses, PausingGate
from signoff_client.context import current_run, running
from signoff_client.models import JsonObject
from signoff_client.rounds import Ask, Round
from signoff_client.runs import Run, default_call_id
from signoff_client.tools import EvidenceFn, ExecuteFn, GuardFn, PreviewFn, ReconcileFn, Tool

#: The key of the interrupt payload that names the signoff call.
PAYLOAD_KEY = "signoff_call"


class LangGraphGate(PausingGate):
    """Gated tool calls inside LangGraph nodes, and resuming threads on signoff's decisions.

    With ``pauses``, each interrupted thread gets a pause record (the thread's config and the
    interrupted call ids) so a resume worker can find the waiting threads. ``name`` and
    ``ttl_minutes``: see ``PausingGate``.
    """

    ADAPTER = "langgraph"
    PAUSED = "paused LangGraph thread: pass its config, or give the gate a pauses store"

    def __init__(self, pauses: Pauses | None = None, *, name: str | None = None,
                 ttl_minutes: float | None = None) -> None:
        super().__init__(pauses, name=name, ttl_minutes=ttl_minutes)

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
                  args=dict(args), ttl_minutes=self.ttl_minutes)
        rnd = Round(run.api, ask)
        await rnd.request()  # the same call_id again is the same call
        interrupt({PAYLOAD_KEY: ask.call_id, "run_id": run.id, "tool": tool, "args": ask.args})
        return await rnd.perform(rejoin=True)

    async def run(self, graph: Any, run: Run, graph_input: Any,
                  config: dict[str, Any]) -> Any:
        """Invoke the graph on ``config``'s thread and resume it on each decision until it
        ends; returns the graph's final state."""
        state = await self._invoke(graph, run, graph_input, config)
        # Each pause is recorded as it happens, so a worker can take over if this process dies.
        while isinstance(settled := self._settle(run, config, state), Paused):
            command = await self._command(run, settled.call_ids, wait=True)
            assert command is not None  # waiting: every call is decided
            state = await self._invoke(graph, run, command, config)
        return settled

    async def start(self, graph: Any, run: Run, graph_input: Any,
                    config: dict[str, Any]) -> Any:
        """Invoke the graph; ``Paused`` if it interrupted on signoff calls (the process may
        exit: the checkpointer keeps the thread), else its final state."""
        state = await self._invoke(graph, run, graph_input, config)
        return self._settle(run, config, state)

    async def resume(self, graph: Any, run: Run, config: dict[str, Any] | None = None,
                     state: Any = None, *, wait: bool = True,
                     keep_pause: bool = False) -> Any:
        """Wait for the decisions on the interrupted calls, then ``Command(resume=...)``.

        The thread and its calls are ``config`` and ``state``'s interrupts, or, when they are
        not given, the run's pause record. Returns the final state, or ``Paused`` when the
        graph interrupted again (or, with ``wait=False``, while a call is still pending).
        With ``keep_pause`` the pause record outlives the graph's end (a worker clears it
        once it has finished the run).
        """
        if config is None:
            config, calls = self._paused_thread(run)
        else:
            calls = interrupted_calls(state)
        command = await self._command(run, calls, wait=wait)
        if command is None:
            return Paused(run.id, calls)
        state = await self._invoke(graph, run, command, config)
        return self._settle(run, config, state, keep_pause)

    async def _command(self, run: Run, calls: list[str], *, wait: bool) -> Command[Any] | None:
        """``Command(resume={call_id: status})`` once every call is decided; None while one is
        pending (only when not waiting)."""
        decided = await self._decided(run, calls, wait=wait)
        if decided is None:
            return None
        return Command(resume={call.call_id: call.status.value for call in decided})

    def _paused_thread(self, run: Run) -> tuple[dict[str, Any], list[str]]:
        record = self._pause_of(run)
        return {"configurable": dict(record.state["configurable"])}, list(record.calls)

    async def _invoke(self, graph: Any, run: Run, graph_input: Any,
                      config: dict[str, Any]) -> Any:
        with running(run):
            return await graph.ainvoke(graph_input, config)

    def _settle(self, run: Run, config: dict[str, Any], state: Any,
                keep_pause: bool = False) -> Any:
        calls = interrupted_calls(state)
        if not calls:
            self._ended(run, keep_pause)
            return state
        return self._paused_on(run, calls, {"configurable": _thread(config)})


def _thread(config: dict[str, Any]) -> dict[str, Any]:
    """The thread's keys to resume it at its latest checkpoint (not a pinned one)."""
    configurable = config.get("configurable") or {}
    return {k: v for k, v in configurable.items()
            if k != "checkpoint_id" and isinstance(v, str | int | float | bool)}


def interrupted_calls(state: Any) -> list[str]:
    """The signoff calls a graph's state is interrupted on."""
    interrupts = state.get("__interrupt__", []) if isinstance(state, dict) else []
    return [i.value[PAYLOAD_KEY] for i in interrupts
            if isinstance(i.value, dict) and PAYLOAD_KEY in i.value]
