"""The fixtures most tests of the real server share; a file that needs another world (SQLite
only, Socket Mode, extra settings) defines its own ``world``, which takes precedence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox import fake_slack
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


@pytest.fixture
async def fake() -> AsyncIterator[fake_slack.FakeSlack]:
    """The Slack stand-in alone, for tests that drive the bot's parts without a server."""
    async with fake_slack.FakeSlack() as server:
        yield server


@pytest.fixture
def client(fake: fake_slack.FakeSlack) -> AsyncWebClient:
    # No rate-limit or server-error retry handlers: every failure reaches the outbox.
    return AsyncWebClient(token="xoxb-test", base_url=fake.api_url, retry_handlers=[])
