"""The fixtures most tests of the real server share; a file that needs another world (SQLite
only, Socket Mode, extra settings) defines its own ``world``, which takes precedence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.bot.api_harness import Agent, make_key
from tests.bot.harness import BotWorld, bot_world


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[BotWorld]:
    """The real server and the Slack stand-in, on each dialect."""
    async with bot_world(database_url) as w:
        yield w


@pytest.fixture
async def agent(world: BotWorld) -> Agent:
    """An external agent with a key of its own (every tool)."""
    return Agent(world, await make_key(world.db))
