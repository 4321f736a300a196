"""OpenAI Agents SDK: ``needs_approval`` tools whose approval, claim and ledger are signoff's.

A gated tool is a ``FunctionTool`` with ``needs_approval=True``. When the model calls it the
run stops with ``result.interruptions`` (the SDK's own pause); the gate turns each into a
signoff call and stores ``RunState.to_json()`` with the run, so the process may exit while
people decide. ``resume`` loads the state (``RunState.from_json``), approves or rejects each
interruption (``reject(rejection_message=reason)``) from signoff's decision, and runs on.

The tool's body runs only through signoff's execution claim, so resuming the same state twice
executes it once (the second time gets the recorded result), and an approval of details that
have since changed is answered ``changed``: the tool then waits for the fresh decision on the
diff card before anything runs.

    gate = OpenAIAgentsGate(FilePauses("./paused"), name="refunds")
    refund = gate.tool(preview=render_refund, guard=check_refund)(refund_order)
    agent = Agent(name="refunds", tools=[refund])
    async with so.run(requester="U123", title="Refunds") as run:
        result = await gate.run(agent, run, "refund order A-1")
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from agents import Agent, FunctionTool, Runner, RunResult, RunState, function_tool
from agents.tool_context import ToolContext

from signoff_client import errors
from signoff_client.adapters.pauses import Paused as Paused
from signoff_client.adapters.pauses import Pauses, PausingGate
from signoff_client.context import current_run, running
from signoff_client.models import Call, CallStatus
from signoff_client.rounds import Ask, Round
from signoff_client.runs import Run
from signoff_client.tools import EvidenceFn, GuardFn, PreviewFn, ReconcileFn, Tool


class OpenAIAgentsGate(PausingGate):
    """Gated tools for an OpenAI Agents SDK agent, and the pause/resume around decisions.
    ``name`` and ``ttl_minutes``: see ``PausingGate``."""

    ADAPTER, PAUSED = "openai_agents", "paused OpenAI Agents run"

    def __init__(self, pauses: Pauses, *, name: str | None = None,
                 ttl_minutes: float | None = None) -> None:
        super().__init__(pauses, name=name, ttl_minutes=ttl_minutes)
        self.gates: dict[str, Tool] = {}

    def tool(self, *, name: str | None = None, preview: PreviewFn | None = None,
             guard: GuardFn | None = None, reconcile: ReconcileFn | None = None,
             evidence: EvidenceFn | None = None) -> Callable[[Callable[..., Any]], FunctionTool]:
        """A gated ``FunctionTool`` from a plain or async function (its signature the schema)."""

        def decorate(fn: Callable[..., Any]) -> FunctionTool:
            made = function_tool(fn, name_override=name, needs_approval=True)
            sdk_invoke = made.on_invoke_tool
            self.gates[made.name] = Tool(name=made.name, preview=preview, guard=guard,
                                         reconcile=reconcile, evidence=evidence)

            async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
                return await self._claimed(made.name, ctx, input_json, sdk_invoke)

            return dataclasses.replace(made, on_invoke_tool=invoke)

        return decorate

    async def _claimed(self, name: str, ctx: ToolContext[Any], input_json: str,
                       sdk_invoke: Callable[[ToolContext[Any], str], Any]) -> Any:
        run = current_run.get()  # per task, so one gate serves concurrent runs
        if run is None:
            raise errors.NoRun(f"{name} needs approval: run the agent through the gate")

        async def body(**_: Any) -> Any:
            return await sdk_invoke(ctx, input_json)

        ask = Ask(run_id=run.id, call_id=ctx.tool_call_id,
                  tool=self.gates[name].with_overrides(execute=body),
                  args=json.loads(input_json or "{}"))
        try:
            return await Round(run.api, ask).perform(rejoin=True)
        except errors.NotApproved as refusal:
            return f"Not run: {refusal}"

    async def run(self, agent: Agent[Any], run: Run, input: str, **options: Any) -> RunResult:
        """Start the agent and see it through every pause to its result, waiting for people."""
        outcome = await self.start(agent, run, input, **options)
        while isinstance(outcome, Paused):
            outcome = await self.resume(agent, run, **options)
        return outcome

    async def start(self, agent: Agent[Any], run: Run, input: str,
                    **options: Any) -> RunResult | Paused:
        return await self._settle(run, await _run_as(run, agent, input, **options))

    async def resume(self, agent: Agent[Any], run: Run, *, wait: bool = True,
                     keep_pause: bool = False, **options: Any) -> RunResult | Paused:
        """Continue a paused agent with the decisions; with ``wait=False`` return ``Paused``
        at once while any call is still pending (for a worker that comes back later). With
        ``keep_pause`` the pause record outlives the agent's end (a worker clears it once it has
        finished the run)."""
        record = self._pause_of(run)
        decided = await self._decided(run, record.calls, wait=wait)
        if decided is None:
            return Paused(run.id, list(record.calls))
        calls = {call.call_id: call for call in decided}
        state = await RunState.from_json(agent, record.state["state"])
        for item in state.get_interruptions():
            call = calls.get(item.call_id or "")
            refusal = _refusal(call) if call is not None else "no signoff decision"
            if refusal is None:
                state.approve(item)
            else:
                state.reject(item, rejection_message=refusal)
        return await self._settle(run, await _run_as(run, agent, state, **options), keep_pause)

    async def _settle(self, run: Run, result: RunResult,
                      keep_pause: bool = False) -> RunResult | Paused:
        if not result.interruptions:
            self._ended(run, keep_pause)
            return result
        call_ids = []
        for item in result.interruptions:
            tool_name, call_id = item.name or "", item.call_id or ""
            gate = self.gates.get(tool_name, Tool(name=tool_name))
            ask = Ask(run_id=run.id, call_id=call_id, tool=gate,
                      args=json.loads(item.arguments or "{}"), ttl_minutes=self.ttl_minutes)
            await Round(run.api, ask).request()
            call_ids.append(call_id)
        return self._paused_on(run, call_ids, {"state": result.to_state().to_json()})


async def _run_as(run: Run, agent: Agent[Any], input: Any, **options: Any) -> RunResult:
    with running(run):
        return await Runner.run(agent, input, **options)


def _refusal(call: Call) -> str | None:
    """Why the model is told the tool did not run; None when it may run (through the claim)."""
    if call.status is CallStatus.declined:
        reason = call.decision.reason if call.decision else None
        return f"Declined by the approver: {reason}" if reason else "Declined by the approver."
    if call.status is CallStatus.expired:
        return "The approval request expired before anyone decided."
    if call.status is CallStatus.cancelled:
        return "The run was cancelled."
    if call.status is CallStatus.blocked:
        return f"Blocked by a check: {call.message}"
    return None
