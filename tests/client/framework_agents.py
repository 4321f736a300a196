"""The refunds agent once per framework, built the same way for the adapter tests and for the
worker tests' agent and worker processes.

Each model (scripted: no network) asks for one refund of order A-1, then answers with what the
tool said. Each builder imports its framework when called, so a process that builds only one
agent imports only that framework.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from signoff_client import NotApproved
from signoff_client.adapters.pauses import Pauses

from tests.client.refunds import Payments

if TYPE_CHECKING:
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo
    from signoff_client.adapters.langgraph import LangGraphGate
    from signoff_client.adapters.openai_agents import OpenAIAgentsGate
    from signoff_client.adapters.pydantic_ai import PydanticAIGate

#: The model's tool call id in the Pydantic AI agent: the signoff call's id.
PYDANTIC_CALL_ID = "call-refund-1"
REFUND = {"order_id": "A-1", "amount": 40.0}


def refund_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] \
        if isinstance(last, ModelRequest) else []
    if returns:
        return ModelResponse(parts=[TextPart(f"tool said: {returns[0].content}")])
    return ModelResponse(parts=[ToolCallPart("refund_order", dict(REFUND),
                                             tool_call_id=PYDANTIC_CALL_ID)])


def pydantic_ai_agent(payments: Payments, pauses: Pauses, **gate_options: Any
                      ) -> tuple[PydanticAIGate[None], PydanticAgent[None, Any]]:
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.models.function import FunctionModel
    from signoff_client.adapters.pydantic_ai import PydanticAIGate

    gate: PydanticAIGate[None] = PydanticAIGate(pauses, **gate_options)
    gate.tool(preview=payments.render, guard=payments.check,
              reconcile=payments.find)(payments.refund_order)
    agent = Agent(FunctionModel(refund_model), toolsets=[gate.toolset],
                  output_type=[str, DeferredToolRequests])
    return gate, agent


def openai_agent(payments: Payments, pauses: Pauses,
                 **gate_options: Any) -> tuple[OpenAIAgentsGate, Any]:
    import agents
    from signoff_client.adapters.openai_agents import OpenAIAgentsGate

    from tests.client.openai_fake_model import RefundModel

    agents.set_tracing_disabled(True)  # the SDK would otherwise export traces over the network
    gate = OpenAIAgentsGate(pauses, **gate_options)
    refund = gate.tool(preview=payments.render, guard=payments.check,
                       reconcile=payments.find)(payments.refund_order)
    return gate, agents.Agent(name="refunds", model=RefundModel(), tools=[refund])


class RefundState(TypedDict, total=False):
    order_id: str
    outcome: str


@asynccontextmanager
async def refund_graph(payments: Payments, checkpoints: Path,
                       gate: LangGraphGate) -> AsyncIterator[Any]:
    """The refund graph on a SQLite checkpointer, open for the block."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    async def refund(state: RefundState) -> RefundState:
        try:
            done = await gate.call("refund_order", {"order_id": state["order_id"],
                                                    "amount": REFUND["amount"]},
                                   execute=payments.refund_order, preview=payments.render,
                                   guard=payments.check, reconcile=payments.find)
        except NotApproved as refusal:
            return {"outcome": f"not refunded: {refusal}"}
        return {"outcome": f"refunded {done['id']}"}

    builder = StateGraph(RefundState)
    builder.add_node("refund", refund)
    builder.add_edge(START, "refund")
    builder.add_edge("refund", END)
    async with AsyncSqliteSaver.from_conn_string(str(checkpoints)) as saver:
        yield builder.compile(checkpointer=saver)
