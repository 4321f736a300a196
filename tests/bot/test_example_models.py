"""The examples' model comes from SIGNOFF_MODEL_*: an OpenAI-compatible API, else the script.

``examples.models.from_env`` reads the variables through ``bot.config.Settings``,
so they mean what `signoff serve --help` and the README say: both the URL and
the key are needed, an empty or blank value counts as unset, and the model name
defaults to ``gpt-4o-mini``. A local server stands in for the model API and
records what each request carried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from bot import config
from examples import models, quotes
from resume.messages import Message
from resume.model import Model
from resume.openai_model import OpenAICompatibleModel
from resume.scripted import ScriptedModel
from tests.bot.harness import ASK

KEY = "sk-test-1234"
VARIABLES = ("SIGNOFF_MODEL_URL", "SIGNOFF_MODEL_API_KEY", "SIGNOFF_MODEL_NAME")


@dataclass
class ModelAPI:
    """An OpenAI-compatible chat-completions endpoint that answers "hello"."""

    url: str = ""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def completions(self, request: web.Request) -> web.Response:
        self.requests.append((request.headers.get("Authorization", ""), await request.json()))
        return web.json_response({
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        })


@pytest.fixture
async def api() -> AsyncIterator[ModelAPI]:
    found = ModelAPI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", found.completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    found.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture(autouse=True)
def no_model_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


async def _ask(model: Model) -> str | None:
    try:
        reply = await model.complete([Message.user("hi")], [])
    finally:
        if isinstance(model, OpenAICompatibleModel):
            await model.aclose()
    return reply.message.content


async def test_from_env__url_and_key_use_the_model_api_with_the_default_name(
    api: ModelAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_MODEL_URL", api.url)
    monkeypatch.setenv("SIGNOFF_MODEL_API_KEY", KEY)

    model = models.from_env(quotes.scripted_model)

    assert isinstance(model, OpenAICompatibleModel)
    assert await _ask(model) == "hello"
    [(authorization, body)] = api.requests
    assert authorization == f"Bearer {KEY}"
    assert body["model"] == "gpt-4o-mini" == config.DEFAULT_MODEL_NAME
    assert body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("name", "sent"), [
    ("small-model", "small-model"), ("  small-model  ", "small-model"),
    ("", "gpt-4o-mini"), ("   ", "gpt-4o-mini"),  # empty counts as unset: the default
])
async def test_from_env__model_name_is_sent_trimmed_or_defaulted(
    api: ModelAPI, monkeypatch: pytest.MonkeyPatch, name: str, sent: str
) -> None:
    monkeypatch.setenv("SIGNOFF_MODEL_URL", api.url)
    monkeypatch.setenv("SIGNOFF_MODEL_API_KEY", KEY)
    monkeypatch.setenv("SIGNOFF_MODEL_NAME", name)

    assert await _ask(models.from_env(quotes.scripted_model)) == "hello"
    assert [body["model"] for _, body in api.requests] == [sent]


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"SIGNOFF_MODEL_URL": "URL"},
        {"SIGNOFF_MODEL_API_KEY": KEY},
        {"SIGNOFF_MODEL_URL": "URL", "SIGNOFF_MODEL_API_KEY": ""},
        {"SIGNOFF_MODEL_URL": "URL", "SIGNOFF_MODEL_API_KEY": "   "},
        {"SIGNOFF_MODEL_URL": "   ", "SIGNOFF_MODEL_API_KEY": KEY},
    ],
    ids=["none", "url-only", "key-only", "empty-key", "blank-key", "blank-url"],
)
async def test_from_env__without_both_url_and_key_the_script_plays_the_agent(
    api: ModelAPI, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value.replace("URL", api.url))

    model = models.from_env(quotes.scripted_model)

    assert isinstance(model, ScriptedModel)
    # The quotes script's first move for a quote request: look the account up.
    reply = await model.complete([Message.user(ASK)], [])
    assert [c.name for c in reply.message.tool_calls or []] == ["lookup_account"]
    assert api.requests == []


async def test_from_env__settings_passed_in_win_over_the_environment(
    api: ModelAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_MODEL_URL", "http://127.0.0.1:1/v1")
    settings = config.load_settings(SIGNOFF_MODEL_URL=api.url, SIGNOFF_MODEL_API_KEY=KEY,
                                    SIGNOFF_MODEL_NAME="from-settings")

    assert await _ask(models.from_env(quotes.scripted_model, settings)) == "hello"
    assert [body["model"] for _, body in api.requests] == ["from-settings"]
