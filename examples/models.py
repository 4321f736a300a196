"""The agent model the examples run with, and what their offline scripts share.

``from_env(fallback)`` is an OpenAI-compatible model when ``SIGNOFF_MODEL_URL`` and
``SIGNOFF_MODEL_API_KEY`` are both set (``SIGNOFF_MODEL_NAME`` picks the model,
``gpt-4o-mini`` by default), else ``fallback()``: each example's ScriptedModel,
which plays the agent offline. The variables are read through
``bot.config.Settings``, so they mean what ``signoff serve --help`` says (an empty
or blank one counts as unset).

The scripts decide from the conversation so far (so they resume anywhere); the
helpers below are how they read a tool's result and answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from bot import config
from resume.messages import Message, ToolCall
from resume.model import Model
from resume.openai_compat import OpenAICompatibleModel


def from_env(
    fallback: Callable[[], Model], settings: config.Settings | None = None
) -> Model:
    """The OpenAI-compatible model the settings name, else ``fallback()``.

    ``settings`` defaults to ``bot.config.load_settings()`` (the environment).
    """
    settings = settings or config.load_settings()
    url, key = settings.model_url, settings.model_api_key
    if url is not None and key is not None:
        return OpenAICompatibleModel(
            base_url=url, api_key=key.get_secret_value(), model=settings.model_name,
            price_per_1k_prompt_usd=0.00015, price_per_1k_completion_usd=0.0006,
        )
    return fallback()


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
