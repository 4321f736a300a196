"""Pydantic AI: deferred tools whose approval, execution claim and ledger are signoff's.

Gated tools live in the gate's toolset. When the model calls one, the tool raises
``ApprovalRequired`` and the agent run ends with ``DeferredToolRequests`` (Pydantic AI's
own pause); the gate turns each request into a signoff call and stores the message history
with the run. Once people decide, ``resume`` hands the decisions back as
``DeferredToolResults``: an approval lets the tool run, and the tool's body then runs only
through signoff's execution claim (re-rendered preview, guard, one winner); a decline or
an expiry becomes ``ToolDenied(reason)``. If the details changed since the approval, the
claim says so, the tool asks for approval again, and the run pauses on the diff card.

    gate = PydanticAIGate(FilePauses("./paused"), name="refunds")

    @gate.tool(preview=render_refund, guard=check_refund, reconcile=find_refund)
    def refund_order(order_id: str, amount: float) -> dict: ...

    agent = Agent(model, toolsets=[gate.toolset], output_type=[str, DeferredToolRequests])
    async with so.run(requester="U123", title="Refunds") as run:
        result = await gate.run(agent, run, "refund order A-1")   # waits for the decisions
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.toolsets import FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from signoff_client import errors
from signoff_client.adapters.pauses import Paused as Paused
from signoff_client.adapters.pauses import Pauses, PausingGate
from signoff_client.context import current_run, running
from signoff_client.models import Call, CallStatus
from signoff_client.rounds import Ask, Round
from signoff_client.runs import Run
from signoff_client.tools import EvidenceFn, GuardFn, PreviewFn, ReconcileFn, Tool

#: What the model is told for each way a call can end without running.
DENIALS = {
    CallStatus.expired: "the approval request expired before anyone decided",
    CallStatus.cancelled: "the run was cancelled",
}


@dataclass
class SignoffToolset(WrapperToolset[AgentDepsT]):
    """Wraps the gated tools: each runs only after approval, and only under the claim."""

    gates: dict[str, Tool] = field(default_factory=dict)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                        tool: ToolsetTool[AgentDepsT]) -> Any:
        gate = self.gates.get(name)
        if gate is None:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        run = current_run.get()  # per task, so one gate serves concurrent runs
        if not ctx.tool_call_approved or run is None or ctx.tool_call_id is None:
            raise ApprovalRequired

        async def body(**_: Any) -> Any:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        ask = Ask(run_id=run.id, call_id=ctx.tool_call_id,
                  tool=gate.with_overrides(execute=body), args=tool_args)
        try:
            return await Round(run.api, ask).perform(rejoin=True, pause=True)
        except errors.AwaitingDecision:
            raise ApprovalRequired from None  # changed: pause again on the diff card
        except errors.NotApproved as refusal:
            return f"Not run: {refusal}"


class PydanticAIGate(PausingGate, Generic[AgentDepsT]):
    """Gated tools for a Pydantic AI agent, and the pause/resume around signoff's decisions.
    ``name`` and ``ttl_minutes``: see ``PausingGate``."""

    ADAPTER, PAUSED = "pydantic_ai", "paused Pydantic AI agent"

    def __init__(self, pauses: Pauses, *, name: str | None = None,
                 ttl_minutes: float | None = None) -> None:
        super().__init__(pauses, name=name, ttl_minutes=ttl_minutes)
        self.functions: FunctionToolset[AgentDepsT] = FunctionToolset()
        self.toolset: SignoffToolset[AgentDepsT] = SignoffToolset(wrapped=self.functions)

    def tool(self, *, name: str | None = None, preview: PreviewFn | None = None,
             guard: GuardFn | None = None, reconcile: ReconcileFn | None = None,
             evidence: EvidenceFn | None = None
             ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Add a plain function as a gated tool (its signature is the tool's schema)."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool_name = name or fn.__name__
            self.functions.add_function(fn, takes_ctx=False, name=tool_name)
            self.toolset.gates[tool_name] = Tool(name=tool_name, preview=preview, guard=guard,
                                                 reconcile=reconcile, evidence=evidence)
            return fn

        return decorate

    async def run(self, agent: Agent[AgentDepsT, Any], run: Run, prompt: str,
                  **options: Any) -> AgentRunResult[Any]:
        """Start the agent and see it through every pause to its result, waiting for people."""
        outcome = await self.start(agent, run, prompt, **options)
        while isinstance(outcome, Paused):
            outcome = await self.resume(agent, run, **options)
        return outcome

    async def start(self, agent: Agent[AgentDepsT, Any], run: Run, prompt: str,
                    **options: Any) -> AgentRunResult[Any] | Paused:
        with running(run):
            result = await agent.run(prompt, **options)
        return await self._settle(run, result)

    async def resume(self, agent: Agent[AgentDepsT, Any], run: Run, *, wait: bool = True,
                     keep_pause: bool = False, **options: Any) -> AgentRunResult[Any] | Paused:
        """Continue a paused agent with the decisions; with ``wait=False`` return ``Paused``
        at once while any call is still pending (for a worker that comes back later). With
        ``keep_pause`` the pause record outlives the agent's end (a worker clears it once it has
        finished the run)."""
        record = self._pause_of(run)
        calls = await self._decided(run, record.calls, wait=wait)
        if calls is None:
            return Paused(run.id, list(record.calls))
        with running(run):
            result = await agent.run(
                message_history=ModelMessagesTypeAdapter.validate_json(
                    record.state["messages"]),
                deferred_tool_results=_results(calls), **options)
        return await self._settle(run, result, keep_pause)

    async def _settle(self, run: Run, result: AgentRunResult[Any],
                      keep_pause: bool = False) -> AgentRunResult[Any] | Paused:
        if not isinstance(result.output, DeferredToolRequests):
            self._ended(run, keep_pause)
            return result
        call_ids = []
        for part in result.output.approvals:
            gate = self.toolset.gates.get(part.tool_name, Tool(name=part.tool_name))
            args = part.args_as_dict()
            await Round(run.api, Ask(run_id=run.id, call_id=part.tool_call_id, tool=gate,
                                     args=args, ttl_minutes=self.ttl_minutes)).request()
            call_ids.append(part.tool_call_id)
        return self._paused_on(run, call_ids, {"messages": result.all_messages_json().decode()})


def _results(calls: list[Call]) -> DeferredToolResults:
    """Approved (or already settled by the ledger): let the tool run through the claim.
    Declined, expired, cancelled, blocked: tell the model why, and never run it."""
    results = DeferredToolResults()
    for call in calls:
        if call.status is CallStatus.declined:
            reason = call.decision.reason if call.decision else None
            results.approvals[call.call_id] = ToolDenied(
                f"Declined by the approver: {reason}" if reason else "Declined by the approver.")
        elif call.status is CallStatus.blocked:
            results.approvals[call.call_id] = ToolDenied(f"Blocked by a check: {call.message}")
        elif call.status in DENIALS:
            results.approvals[call.call_id] = ToolDenied(DENIALS[call.status])
        else:
            results.approvals[call.call_id] = True
    return results
