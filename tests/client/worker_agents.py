"""The worker tests' agents, as a user's module would hold them, run in processes of their own.

    python -m tests.client.worker_agents ADAPTER RUN_KEY   # the agent: starts, pauses, exits
    signoff-worker tests.client.worker_agents:worker       # the worker that resumes them

Both read SIGNOFF_URL, SIGNOFF_API_KEY and WORKER_TEST_DIR (payments.json, paused/, graph.db).
The worker registers the adapters listed in WORKER_ADAPTERS (default: all three) and passes
again every WORKER_RESCAN_SECONDS, giving each run WORKER_READ_SECONDS to be read.
WORKER_TTL_MINUTES sets how long the agent's card waits;
WORKER_BROKEN names an adapter whose model raises once resumed; WORKER_BROKEN_ANSWER one whose
answer= raises (the agent has run, the run is not finished yet).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from signoff_client import Signoff
from signoff_client.adapters.langgraph import LangGraphGate
from signoff_client.adapters.pauses import FilePauses, Paused
from signoff_client.worker import Worker

from tests.client import framework_agents
from tests.client.refunds import Payments

ADAPTERS = ("pydantic_ai", "openai_agents", "langgraph")
NAMES = {"pydantic_ai": "refunds-pai", "openai_agents": "refunds-oai", "langgraph": "refunds-lg"}
REQUESTER = "U0CLIENT01"


def _setting(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def _dir() -> Path:
    return Path(_setting("WORKER_TEST_DIR"))


def _gate_options(adapter: str) -> dict[str, Any]:
    ttl = _setting("WORKER_TTL_MINUTES")
    return {"name": NAMES[adapter], "ttl_minutes": float(ttl) if ttl else None}


def _thread(run_key: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": run_key}}


def broken_model() -> Any:
    """An Agents SDK model that is down: the resumed agent raises."""
    from agents import Model

    class BrokenModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the model is down")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the tests never stream")

    return BrokenModel()


def _answer(adapter: str) -> Any:
    if _setting("WORKER_BROKEN_ANSWER") != adapter:
        return None

    def broken(result: Any) -> str:
        raise RuntimeError("the answer could not be made")

    return broken


@asynccontextmanager
async def worker() -> AsyncIterator[Worker]:
    """The target of ``signoff-worker``: an async context manager, for the graph's saver."""
    payments, pauses = Payments(_dir() / "payments.json"), FilePauses(_dir() / "paused")
    wanted = _setting("WORKER_ADAPTERS", ",".join(ADAPTERS)).split(",")
    made = Worker(rescan_seconds=float(_setting("WORKER_RESCAN_SECONDS", "30")),
                  read_seconds=float(_setting("WORKER_READ_SECONDS", "30")))
    if "pydantic_ai" in wanted:
        gate, agent = framework_agents.pydantic_ai_agent(payments, pauses,
                                                         **_gate_options("pydantic_ai"))
        made.pydantic_ai(gate, agent, answer=_answer("pydantic_ai"))
    if "openai_agents" in wanted:
        sdk_gate, sdk_agent = framework_agents.openai_agent(payments, pauses,
                                                            **_gate_options("openai_agents"))
        if _setting("WORKER_BROKEN") == "openai_agents":
            sdk_agent = sdk_agent.clone(model=broken_model())
        made.openai_agents(sdk_gate, sdk_agent)
    async with AsyncExitStack() as stack:
        if "langgraph" in wanted:
            graph_gate = LangGraphGate(pauses, **_gate_options("langgraph"))
            graph = await stack.enter_async_context(framework_agents.refund_graph(
                payments, _dir() / "graph.db", graph_gate))
            made.langgraph(graph_gate, graph, answer=lambda state: str(state["outcome"]))
        yield made


async def start(adapter: str, run_key: str) -> Paused:
    """Start the agent in a run of its own; it pauses on the refund, and this process ends."""
    payments, pauses = Payments(_dir() / "payments.json"), FilePauses(_dir() / "paused")
    async with Signoff(_setting("SIGNOFF_URL"), api_key=_setting("SIGNOFF_API_KEY")) as so:
        run = await so.start_run(requester=REQUESTER, title=f"Worker refund ({adapter})",
                                 idempotency_key=run_key, requires=["refund_order"])
        if adapter == "langgraph":
            gate = LangGraphGate(pauses, **_gate_options(adapter))
            async with framework_agents.refund_graph(payments, _dir() / "graph.db",
                                                     gate) as graph:
                outcome = await gate.start(graph, run, {"order_id": "A-1"}, _thread(run_key))
        elif adapter == "pydantic_ai":
            pai_gate, agent = framework_agents.pydantic_ai_agent(payments, pauses,
                                                                 **_gate_options(adapter))
            outcome = await pai_gate.start(agent, run, "refund order A-1")
        else:
            sdk_gate, sdk_agent = framework_agents.openai_agent(payments, pauses,
                                                                **_gate_options(adapter))
            outcome = await sdk_gate.start(sdk_agent, run, "refund order A-1")
    if not isinstance(outcome, Paused):
        raise SystemExit(f"the agent did not pause: {outcome!r}")
    return outcome


if __name__ == "__main__":
    paused = asyncio.run(start(sys.argv[1], sys.argv[2]))
    print(json.dumps({"run_id": paused.run_id, "calls": paused.call_ids}), flush=True)
