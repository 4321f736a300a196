"""A deterministic model, for tests and demos.

``ScriptedModel`` answers from a script instead of a network: the same
conversation always yields the same reply, ids and usage. Because the reply is a
function of the conversation (not of how many times the object was called), a
run resumed in another process, from its stored messages, continues the script
where it stopped.

    model = ScriptedModel.turns([
        Message.assistant(None, [ToolCall(name="draft_quote", arguments={"customer": "Acme"})]),
        "Drafted and sent the quote.",
    ])

A script that decides from the conversation so far (so it resumes anywhere)
reads a tool's result with ``result_of`` and answers with ``call`` (one tool
call) or ``did_not_finish`` (the final answer after an error result).
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from resume.messages import Message, ModelReply, ToolCall, ToolSpec, Usage

#: How many of the latest conversations ``ScriptedModel.seen`` keeps.
SEEN_KEPT = 100

#: What a script step may answer: an assistant message, or text as a final answer.
Turn = Message | str
Script = Callable[[Sequence[Message], Sequence[ToolSpec]], Turn | Awaitable[Turn]]


class ScriptExhausted(LookupError):
    """The script has no turn left for this conversation.

    Not a ``ModelError``: it is a bug in the test or demo, and must not be
    mistaken for a provider failure and recorded as one.
    """

    def __init__(self, turns: int, requested: int) -> None:
        self.turns = turns
        self.requested = requested
        super().__init__(
            f"ScriptedModel.turns has {turns} turn(s) but the conversation already holds "
            f"{requested - 1} assistant message(s), so turn {requested} was requested. "
            "Add a turn, or end the script with a final answer (no tool calls)."
        )


class ScriptedModel:
    """A ``Model`` that answers with ``script(messages, tools)``.

    Tool calls without an id get ``call_<n>``, where ``n`` counts the tool calls
    in the conversation so far (skipping ids already used). Every call costs
    ``cost_per_call_usd`` and reports the fixed token counts. ``calls`` counts
    completions served by this object; ``seen`` keeps the conversations the last
    ``SEEN_KEPT`` of them were given, oldest first, for tests to inspect what the
    model was told. Bounded: `signoff serve` plays the offline agent with one of
    these for the life of the process, and it must not hold every conversation.
    """

    def __init__(
        self,
        script: Script,
        *,
        cost_per_call_usd: float = 0.001,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
    ) -> None:
        self._script = script
        self.usage_per_call = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost_per_call_usd,
        )
        self.calls = 0
        self.seen: deque[list[Message]] = deque(maxlen=SEEN_KEPT)

    @classmethod
    def turns(
        cls,
        turns: Sequence[Turn],
        *,
        cost_per_call_usd: float = 0.001,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
    ) -> ScriptedModel:
        """Answer with ``turns[k]``, where ``k`` is the number of assistant messages so far.

        Past the end raises ``ScriptExhausted``.
        """
        fixed = list(turns)

        def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
            k = sum(1 for m in messages if m.role == "assistant")
            if k >= len(fixed):
                raise ScriptExhausted(turns=len(fixed), requested=k + 1)
            return fixed[k]

        return cls(
            script,
            cost_per_call_usd=cost_per_call_usd,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        self.calls += 1
        self.seen.append(list(messages))
        turn = self._script(messages, tools)
        if inspect.isawaitable(turn):
            turn = await turn
        message = _as_assistant(turn)
        return ModelReply(message=_with_ids(message, messages), usage=self.usage_per_call)


def _as_assistant(turn: Turn) -> Message:
    if isinstance(turn, str):
        return Message.assistant(turn)
    if turn.role != "assistant":
        raise TypeError(f"a script must answer with an assistant message, got role {turn.role!r}")
    return turn


def _with_ids(message: Message, history: Sequence[Message]) -> Message:
    """Give id-less tool calls a ``call_<n>`` id that is stable for this conversation."""
    if all(call.id for call in message.tool_calls):
        return message
    earlier = [call.id for m in history for call in m.tool_calls]
    used = set(earlier) | {call.id for call in message.tool_calls if call.id}
    n = len(earlier)
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        if not call.id:
            n += 1
            while f"call_{n}" in used:
                n += 1
            call = call.model_copy(update={"id": f"call_{n}"})
            used.add(call.id)
        calls.append(call)
    return message.model_copy(update={"tool_calls": calls})


def result_of(message: Message) -> dict[str, Any]:
    """A tool message's result: a JSON object as is, other JSON as ``value``, else ``raw``."""
    try:
        data = json.loads(message.content or "{}")
    except json.JSONDecodeError:
        data = {"raw": message.content}
    return data if isinstance(data, dict) else {"value": data}


def call(name: str, **arguments: Any) -> Message:
    """The assistant's turn that calls one tool."""
    return Message.assistant(None, [ToolCall(name=name, arguments=arguments)])


def did_not_finish(error: Mapping[str, Any]) -> Message:
    """The final answer after a tool call came back as an error (refused, guarded, ...)."""
    reason = f" ({error['reason']})" if error.get("reason") else ""
    return Message.assistant(f"I did not finish: {error.get('message') or error['error']}{reason}")
