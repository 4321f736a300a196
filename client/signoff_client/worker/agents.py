"""The agents a worker resumes: one registration per gate, whatever its framework.

A registration only holds the user's gate and agent (or graph) and calls the gate's own
``resume(..., wait=False)``; nothing here imports a framework, so a worker that registers
only a LangGraph graph never imports Pydantic AI or the Agents SDK.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from signoff_client.adapters.pauses import FilePauses, ListedPauses, Paused, PauseRecord
from signoff_client.runs import Run

if TYPE_CHECKING:
    from signoff_client.adapters.langgraph import LangGraphGate
    from signoff_client.adapters.openai_agents import OpenAIAgentsGate
    from signoff_client.adapters.pydantic_ai import PydanticAIGate

#: What the run is finished with, from what the resumed agent ended with.
AnswerFn = Callable[[Any], str]
ResumeFn = Callable[[Run], Awaitable[Any]]


@dataclass(frozen=True)
class Registered:
    """One agent the worker can resume: its pauses, its gate's resume, its answer."""

    adapter: str
    name: str | None
    pauses: ListedPauses
    resume: ResumeFn
    answer: AnswerFn

    def label(self) -> str:
        return f"{self.adapter} agent {self.name!r}" if self.name else f"{self.adapter} agent"


def listed(pauses: object, adapter: str) -> ListedPauses:
    if not callable(getattr(pauses, "paused", None)):
        raise TypeError(f"the {adapter} gate's pauses store has no paused(): the worker could "
                        "not find its paused runs (FilePauses has it; add it to your store)")
    return pauses  # type: ignore[return-value]  # checked just above, structurally


def pydantic_ai(gate: PydanticAIGate[Any], agent: Any, answer: AnswerFn | None,
                options: dict[str, Any]) -> Registered:
    async def resume(run: Run) -> Any:
        return await gate.resume(agent, run, wait=False, keep_pause=True, **options)

    return Registered(gate.ADAPTER, gate.name, listed(gate.pauses, gate.ADAPTER), resume,
                      answer or (lambda result: str(result.output)))


def openai_agents(gate: OpenAIAgentsGate, agent: Any, answer: AnswerFn | None,
                  options: dict[str, Any]) -> Registered:
    async def resume(run: Run) -> Any:
        return await gate.resume(agent, run, wait=False, keep_pause=True, **options)

    return Registered(gate.ADAPTER, gate.name, listed(gate.pauses, gate.ADAPTER), resume,
                      answer or (lambda result: str(result.final_output)))


def langgraph(gate: LangGraphGate, graph: Any, answer: AnswerFn | None) -> Registered:
    if gate.pauses is None:
        raise TypeError("the LangGraph gate keeps no pause records: give it a pauses store, "
                        "LangGraphGate(FilePauses(...), name=...), so the worker finds its "
                        "threads")

    async def resume(run: Run) -> Any:
        return await gate.resume(graph, run, wait=False, keep_pause=True)

    return Registered(gate.ADAPTER, gate.name, listed(gate.pauses, gate.ADAPTER), resume,
                      answer or _state_answer)


def _state_answer(state: Any) -> str:
    """A graph's final state as the run's answer: its last message if it keeps messages."""
    messages = state.get("messages") if isinstance(state, dict) else None
    if isinstance(messages, list) and messages:
        return str(getattr(messages[-1], "content", messages[-1]))
    return json.dumps(state, default=str, ensure_ascii=False)


def still_paused(outcome: Any) -> bool:
    return isinstance(outcome, Paused)

def store_key(pauses: ListedPauses) -> object:
    """Two FilePauses on one directory are one store; any other store is itself."""
    if isinstance(pauses, FilePauses):
        return pauses.directory.resolve()
    return id(pauses)


def match(candidates: list[Registered], record: PauseRecord) -> Registered | None:
    """The registration a pause belongs to; a pause that names no agent (the first record
    format, or a gate without ``name``) goes to the only one of its adapter."""
    same = [r for r in candidates if r.adapter == record.adapter]
    if record.agent is None:
        return same[0] if len(same) == 1 else None
    return next((r for r in same if r.name == record.agent), None)
