"""The agent model the examples run with, and what their offline scripts share.

``from_env(fallback)`` is an OpenAI-compatible model when ``SIGNOFF_MODEL_URL`` and
``SIGNOFF_MODEL_API_KEY`` are both set (``SIGNOFF_MODEL_NAME`` picks the model,
``gpt-4o-mini`` by default), else ``fallback()``: each example's ScriptedModel
(``scripted(script)``), which plays the agent offline. The variables are read through
``bot.config.Settings``, so they mean what ``signoff serve --help`` says (an empty
or blank one counts as unset).

``database_from_env()`` opens DATABASE_URL (the embedded SQLite file by
default) for an example's own tables (the CRM, the shop); ``one_row`` and
``row_by`` read one row of them back as a dict.

The scripts read a tool's result and answer with ``resume``'s script helpers
(``result_of``, ``call``, ``did_not_finish``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bot import config
from resume import (
    DEFAULT_URL,
    Database,
    Model,
    OpenAICompatibleModel,
    Script,
    ScriptedModel,
    connect,
)

#: What the examples' offline agent charges a turn, so that budgets have something to count.
SCRIPTED_COST_PER_CALL_USD = 0.002


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


def scripted(script: Script) -> Model:
    """``script`` playing the agent offline, each turn priced ``SCRIPTED_COST_PER_CALL_USD``."""
    return ScriptedModel(script, cost_per_call_usd=SCRIPTED_COST_PER_CALL_USD)


def database_from_env() -> Database:
    """The database DATABASE_URL names (the embedded SQLite file by default)."""
    return connect(os.environ.get("DATABASE_URL", DEFAULT_URL))


async def one_row(conn: AsyncConnection, stmt: Select[Any]) -> dict[str, Any] | None:
    """The first row ``stmt`` selects, as a dict; None when there is none."""
    row = (await conn.execute(stmt)).mappings().first()
    return dict(row) if row else None


async def row_by(conn: AsyncConnection, column: Column[Any], value: str) -> dict[str, Any] | None:
    """The row of ``column``'s table whose ``column`` is ``value`` (a key: one at most)."""
    return await one_row(conn, select(column.table).where(column == value))
