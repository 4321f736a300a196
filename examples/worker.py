"""Durable pauses: each agent pauses on its refund card and exits; a resume worker resumes it
once a person decides. Nothing stays up through the wait but the worker (and it may restart).

The three agents are the ones in ``examples/external_pydantic_ai.py``,
``external_openai_agents.py`` and ``external_langgraph.py``; their gates keep pause records in
``./paused/``, each under the gate's name, which is how the worker knows whose pause it is.
Against the sandbox, with the key ``examples/external_refunds.py`` says how to create::

    export SIGNOFF_URL=http://127.0.0.1:3000 SIGNOFF_API_KEY=so_...
    .venv/bin/python -m examples.worker start pydantic_ai     # pauses, prints the run, exits
    .venv/bin/python -m examples.worker start openai_agents   # (each is a run of its own)
    .venv/bin/python -m examples.worker start langgraph
    .venv/bin/signoff-worker examples.worker:worker          # Ctrl-C stops it

Approve or decline the cards on the sandbox page: the worker resumes each agent (a decline
is told to the model; nothing runs), the refund runs once, and the run ends. Stop the worker
at any point and start it again: it picks up every run still paused. With a key created with
``--webhook http://127.0.0.1:8787/webhook``, ``SIGNOFF_WEBHOOK_SECRET=whsec_...
signoff-worker examples.worker:worker --webhook-port 8787`` waits for webhooks instead of
long-polling (the variable, not ``--webhook-secret``: arguments show in ``ps``).

The agents here only ``gate.start``; never ``gate.run`` on a store a worker watches, or the
model and the ungated tools would run twice (the claim protects only the gated tool).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from signoff_client.worker import Worker

from examples import external_langgraph, external_openai_agents, external_pydantic_ai

#: Each agent ``start`` can start, by the name on the command line.
EXAMPLES = {"pydantic_ai": external_pydantic_ai, "openai_agents": external_openai_agents,
            "langgraph": external_langgraph}
KINDS = tuple(EXAMPLES)


@asynccontextmanager
async def worker() -> AsyncIterator[Worker]:
    """What ``signoff-worker examples.worker:worker`` runs: every agent registered by its gate,
    the graph's checkpointer open while the worker runs."""
    made = Worker()
    made.pydantic_ai(*external_pydantic_ai.build())
    made.openai_agents(*external_openai_agents.build())
    async with AsyncSqliteSaver.from_conn_string(external_langgraph.CHECKPOINTS) as saver:
        graph = external_langgraph.graph_builder().compile(checkpointer=saver)
        made.langgraph(external_langgraph.gate, graph, answer=lambda s: str(s["outcome"]))
        yield made


async def start(kind: str) -> None:
    """Start one agent in a run of its own; it pauses on its card and this process ends."""
    await EXAMPLES[kind].main()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "start" or sys.argv[2] not in KINDS:
        print(f"usage: python -m examples.worker start {{{'|'.join(KINDS)}}}", file=sys.stderr)
        raise SystemExit(2)
    asyncio.run(start(sys.argv[2]))
