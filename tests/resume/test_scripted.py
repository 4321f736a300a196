"""ScriptedModel: the same conversation always gets the same reply."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from resume import scripted
from resume.messages import Message, ModelReply, ToolCall, ToolSpec
from resume.scripted import ScriptedModel, ScriptExhausted

DRAFT = ToolSpec(name="draft_quote", description="Draft a quote.")
QUESTION = [Message.user("Quote Acme for 1200.")]


def _script() -> ScriptedModel:
    return ScriptedModel.turns(
        [
            Message.assistant(
                None,
                [
                    ToolCall(name="draft_quote", arguments={"customer": "Acme"}),
                    ToolCall(name="draft_quote", arguments={"customer": "Globex"}),
                ],
            ),
            Message.assistant(None, [ToolCall(name="send_quote", arguments={"quote": 1})]),
            "Sent.",
        ]
    )


def _answer(history: list[Message], reply: ModelReply) -> list[Message]:
    results = [Message.tool_result(c.id, c.name, "ok") for c in reply.message.tool_calls]
    return [*history, reply.message, *results]


async def test_scripted__turns_follow_the_conversation() -> None:
    model = _script()

    first = await model.complete(QUESTION, [DRAFT])
    history = _answer(QUESTION, first)
    second = await model.complete(history, [DRAFT])
    history = _answer(history, second)
    final = await model.complete(history, [DRAFT])

    assert [c.id for c in first.message.tool_calls] == ["call_1", "call_2"]
    assert [c.id for c in second.message.tool_calls] == ["call_3"]
    assert second.message.tool_calls[0].arguments == {"quote": 1}
    assert final.message.content == "Sent." and final.message.tool_calls == []
    assert model.calls == 3
    assert model.seen[2] == history
    assert final.usage.cost_usd == 0.001
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (100, 20)


async def test_scripted__seen_keeps_only_the_latest_conversations() -> None:
    # A long-lived process (signoff serve's offline agent) must not hold every conversation.
    model = ScriptedModel.turns(["Done."])
    asked = [[Message.user(f"question {i}")] for i in range(scripted.SEEN_KEPT + 5)]

    for conversation in asked:
        await model.complete(conversation, [DRAFT])

    assert model.calls == scripted.SEEN_KEPT + 5
    assert list(model.seen) == asked[5:]


async def test_scripted__a_resumed_conversation_gets_the_same_reply() -> None:
    before_restart = _script()
    first = await before_restart.complete(QUESTION, [DRAFT])
    history = _answer(QUESTION, first)
    expected = await before_restart.complete(history, [DRAFT])

    after_restart = _script()  # a new process, handed the stored messages
    resumed = await after_restart.complete(history, [DRAFT])

    assert resumed == expected
    assert after_restart.calls == 1


async def test_scripted__turns_past_the_end_raise_a_clear_error() -> None:
    model = ScriptedModel.turns(["Only answer."])
    history = [*QUESTION, Message.assistant("Only answer."), Message.user("And again?")]

    with pytest.raises(ScriptExhausted) as caught:
        await model.complete(history, [])

    assert "has 1 turn(s)" in str(caught.value) and "turn 2 was requested" in str(caught.value)


async def test_scripted__given_ids_are_kept_and_not_reused() -> None:
    model = ScriptedModel.turns(
        [
            Message.assistant(
                None, [ToolCall(id="call_2", name="a"), ToolCall(name="b"), ToolCall(name="c")]
            )
        ]
    )

    reply = await model.complete(QUESTION, [])

    assert [c.id for c in reply.message.tool_calls] == ["call_2", "call_1", "call_3"]


async def test_scripted__async_script_with_custom_cost() -> None:
    async def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        return Message.assistant(f"{len(messages)} messages, tools: {[t.name for t in tools]}")

    model = ScriptedModel(script, cost_per_call_usd=0.25, prompt_tokens=7, completion_tokens=3)

    reply = await model.complete(QUESTION, [DRAFT])

    assert reply.message.content == "1 messages, tools: ['draft_quote']"
    assert reply.usage.cost_usd == 0.25 and reply.usage.prompt_tokens == 7


async def test_scripted__a_non_assistant_turn_is_rejected() -> None:
    model = ScriptedModel(lambda messages, tools: Message.user("not the model's line"))

    with pytest.raises(TypeError, match="assistant message"):
        await model.complete(QUESTION, [])


def test_messages__round_trip_through_json() -> None:
    message = Message.assistant(
        "thinking",
        [ToolCall(id="call_1", name="send_quote", arguments={}, raw_arguments='{"amount": ')],
    )

    stored = message.model_dump(mode="json")

    assert Message.model_validate(stored) == message
    assert stored["tool_calls"][0]["raw_arguments"] == '{"amount": '
