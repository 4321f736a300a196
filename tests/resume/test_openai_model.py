"""The OpenAI-compatible adapter against a local stand-in for /v1/chat/completions."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from resume import model
from resume.messages import Message, ToolSpec
from resume.openai_model import OpenAICompatibleModel

Handler = Callable[[dict[str, Any]], Awaitable[web.Response]]

API_KEY = "sk-test-123"
SEND_QUOTE = ToolSpec(
    name="send_quote",
    description="Send a drafted quote to the customer.",
    parameters={
        "type": "object",
        "properties": {"customer": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["customer", "amount"],
    },
)


@dataclass
class StandIn:
    """A chat-completions server that answers from a queue and keeps what it was sent."""

    base_url: str = ""
    replies: list[Handler] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {API_KEY}":
            return _error(401, "Incorrect API key provided.")
        body = await request.json()
        problem = _shape_problem(body)
        if problem:
            return _error(400, problem)
        self.requests.append(body)
        return await self.replies.pop(0)(body)


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request"}}, status=status
    )


def _shape_problem(body: dict[str, Any]) -> str | None:
    """What the real API would reject; None if the request is well formed."""
    if not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
        return "model and messages are required"
    for tool in body.get("tools", []):
        function = tool.get("function", {})
        if tool.get("type") != "function" or not {"name", "parameters"} <= function.keys():
            return f"invalid tool: {tool}"
    if "tool_choice" in body and "tools" not in body:
        return "tool_choice is only allowed when tools are specified"
    for message in body["messages"]:
        for call in message.get("tool_calls", []):
            if not isinstance(call["function"]["arguments"], str):
                return "tool_calls[].function.arguments must be a string"
            json.loads(call["function"]["arguments"])
        if message["role"] == "tool" and not message.get("tool_call_id"):
            return "tool messages need tool_call_id"
    return None


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
) -> Handler:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls

    async def reply(_: dict[str, Any]) -> web.Response:
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0},
            }
        )

    return reply


def raw(status: int, text: str, headers: dict[str, str] | None = None) -> Handler:
    async def reply(_: dict[str, Any]) -> web.Response:
        return web.Response(status=status, text=text, headers=headers)

    return reply


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
async def stand_in() -> AsyncIterator[StandIn]:
    server = StandIn()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.base_url = f"http://127.0.0.1:{port}/v1"
    yield server
    server.release.set()
    await runner.cleanup()


@pytest.fixture
async def adapter(stand_in: StandIn) -> AsyncIterator[OpenAICompatibleModel]:
    m = OpenAICompatibleModel(
        base_url=stand_in.base_url,
        api_key=API_KEY,
        model="gpt-test",
        price_per_1k_prompt_usd=0.5,
        price_per_1k_completion_usd=1.5,
        timeout_s=2,
    )
    yield m
    await m.aclose()


CONVERSATION = [Message.system("You draft quotes."), Message.user("Send Acme a quote for 1200.")]


async def test_openai_compat__round_trips_tool_calls_and_usage(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies += [
        completion(
            tool_calls=[call("call_abc", "send_quote", '{"customer": "Acme", "amount": 1200}')],
            usage={"prompt_tokens": 1000, "completion_tokens": 500},
        ),
        completion(
            "Sent the quote to Acme.", usage={"prompt_tokens": 2000, "completion_tokens": 10}
        ),
    ]

    first = await adapter.complete(CONVERSATION, [SEND_QUOTE])

    [tool_call] = first.message.tool_calls
    assert (tool_call.id, tool_call.name) == ("call_abc", "send_quote")
    assert tool_call.arguments == {"customer": "Acme", "amount": 1200}
    assert not tool_call.malformed
    assert first.usage.prompt_tokens == 1000 and first.usage.completion_tokens == 500
    assert first.usage.cost_usd == pytest.approx(1000 / 1000 * 0.5 + 500 / 1000 * 1.5)

    history = [*CONVERSATION, first.message, Message.tool_result("call_abc", "send_quote", "sent")]
    second = await adapter.complete(history, [SEND_QUOTE])

    assert second.message.content == "Sent the quote to Acme."
    assert second.message.tool_calls == []
    assert second.usage.cost_usd == pytest.approx(2000 / 1000 * 0.5 + 10 / 1000 * 1.5)

    sent = stand_in.requests[1]
    assert sent["model"] == "gpt-test"
    assert sent["tool_choice"] == "auto"
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "send_quote",
                "description": SEND_QUOTE.description,
                "parameters": SEND_QUOTE.parameters,
            },
        }
    ]
    assistant, tool = sent["messages"][2], sent["messages"][3]
    assert assistant["role"] == "assistant"
    [echoed] = assistant["tool_calls"]
    assert echoed["id"] == "call_abc" and echoed["function"]["name"] == "send_quote"
    assert json.loads(echoed["function"]["arguments"]) == {"customer": "Acme", "amount": 1200}
    assert tool == {"role": "tool", "tool_call_id": "call_abc", "content": "sent"}


async def test_openai_compat__no_tools_sends_no_tool_choice(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies.append(completion("Hello."))

    reply = await adapter.complete([Message.user("hi")], [])

    assert reply.message.content == "Hello."
    assert "tools" not in stand_in.requests[0] and "tool_choice" not in stand_in.requests[0]


async def test_openai_compat__malformed_arguments_are_kept_not_fatal(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies += [
        completion(
            tool_calls=[
                call("call_1", "send_quote", '{"customer": "Acme", "amount": '),
                call("call_2", "send_quote", '["not", "an", "object"]'),
            ]
        ),
        completion("Sorry, retrying."),
    ]

    reply = await adapter.complete(CONVERSATION, [SEND_QUOTE])

    broken, listed = reply.message.tool_calls
    assert broken.arguments == {} and broken.raw_arguments == '{"customer": "Acme", "amount": '
    assert listed.arguments == {} and listed.raw_arguments == '["not", "an", "object"]'
    assert broken.malformed and listed.malformed

    # The mangled call can go back in the history (the stand-in rejects invalid JSON there).
    error = "arguments were not valid JSON"
    history = [
        *CONVERSATION,
        reply.message,
        Message.tool_result("call_1", "send_quote", error),
        Message.tool_result("call_2", "send_quote", error),
    ]
    again = await adapter.complete(history, [SEND_QUOTE])
    assert again.message.content == "Sorry, retrying."


async def test_openai_compat__429_reports_retry_after(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies.append(
        raw(429, '{"error": {"message": "Rate limit reached"}}', {"Retry-After": "7"})
    )

    with pytest.raises(model.ModelRateLimited) as caught:
        await adapter.complete(CONVERSATION, [SEND_QUOTE])

    assert caught.value.retry_after == 7.0
    assert caught.value.retryable
    message = str(caught.value)
    assert "429" in message and adapter.endpoint in message and "retry after 7s" in message


async def test_openai_compat__500_is_a_server_error(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies.append(raw(500, "upstream exploded"))

    with pytest.raises(model.ModelServerError) as caught:
        await adapter.complete(CONVERSATION, [SEND_QUOTE])

    assert caught.value.status == 500
    message = str(caught.value)
    assert "500" in message and adapter.endpoint in message and "upstream exploded" in message


async def test_openai_compat__400_names_the_providers_message(
    stand_in: StandIn, adapter: OpenAICompatibleModel
) -> None:
    stand_in.replies.append(
        raw(400, json.dumps({"error": {"message": "Invalid schema for function 'send_quote'"}}))
    )

    with pytest.raises(model.ModelRequestError) as caught:
        await adapter.complete(CONVERSATION, [SEND_QUOTE])

    assert caught.value.status == 400
    assert caught.value.body == "Invalid schema for function 'send_quote'"
    assert not caught.value.retryable
    assert "400" in str(caught.value) and "Invalid schema" in str(caught.value)


async def test_openai_compat__wrong_key_says_check_the_key(stand_in: StandIn) -> None:
    async with OpenAICompatibleModel(stand_in.base_url, "sk-wrong", "gpt-test", 0.5, 1.5) as m:
        with pytest.raises(model.ModelRequestError) as caught:
            await m.complete(CONVERSATION, [])

    assert caught.value.status == 401
    assert "Incorrect API key" in str(caught.value) and "check the API key" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("<html>gateway</html>", "not JSON"),
        ('{"id": "x", "choices": []}', "no choices"),
        ('{"error": {"message": "model overloaded"}}', "model overloaded"),
    ],
)
async def test_openai_compat__unusable_body_is_a_bad_response(
    stand_in: StandIn, adapter: OpenAICompatibleModel, body: str, said: str
) -> None:
    stand_in.replies.append(raw(200, body))

    with pytest.raises(model.ModelBadResponse) as caught:
        await adapter.complete(CONVERSATION, [SEND_QUOTE])

    assert said in str(caught.value) and adapter.endpoint in str(caught.value)


async def test_openai_compat__slow_endpoint_times_out(stand_in: StandIn) -> None:
    async def stall(_: dict[str, Any]) -> web.Response:
        await stand_in.release.wait()
        return web.json_response({})

    stand_in.replies.append(stall)
    async with OpenAICompatibleModel(
        stand_in.base_url, API_KEY, "gpt-test", 0.5, 1.5, timeout_s=0.2
    ) as m:
        with pytest.raises(model.ModelTimeout) as caught:
            await m.complete(CONVERSATION, [])
    stand_in.release.set()

    assert "0.2s" in str(caught.value) and m.endpoint in str(caught.value)


async def test_openai_compat__unreachable_endpoint_is_reported() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with OpenAICompatibleModel(f"http://127.0.0.1:{port}/v1", API_KEY, "m", 0, 0) as m:
        with pytest.raises(model.ModelUnreachable) as caught:
            await m.complete(CONVERSATION, [])

    assert f"127.0.0.1:{port}/v1/chat/completions" in str(caught.value)


async def test_openai_compat__borrowed_session_stays_open(stand_in: StandIn) -> None:
    stand_in.replies.append(completion("ok"))
    async with aiohttp.ClientSession() as session:
        m = OpenAICompatibleModel(stand_in.base_url, API_KEY, "gpt-test", 0, 0, session=session)
        reply = await m.complete(CONVERSATION, [])
        await m.aclose()

        assert reply.message.content == "ok"
        assert not session.closed
