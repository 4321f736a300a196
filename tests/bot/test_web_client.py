"""The bot's Slack client rides out a 429, a 5xx and a dropped connection on its own.

``bot.bolt_app.web_client`` is the one client `signoff serve` builds (the outbox relay
uses it, and Bolt copies its retry handlers into every per-request client), so
these tests build it from ``Settings`` and point it at the Slack stand-in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)

from bot import bolt_app, config, ids
from bot.sandbox import fake_slack
from store import runs
from store.states import RunState
from tests.bot.harness import APPROVALS, ASK, REP, SECRET, TOKEN, BotWorld, bot_world


def _settings(api_url: str) -> config.Settings:
    return config.load_settings(SLACK_BOT_TOKEN=TOKEN, SLACK_SIGNING_SECRET=SECRET,
                                SLACK_API_URL=api_url)


class DropFirst:
    """A TCP relay to ``port`` that drops the first ``drops`` connections unanswered:
    what a client sees when a load balancer resets it."""

    def __init__(self, port: int, drops: int = 1) -> None:
        self._port, self.drops = port, drops
        self.dropped = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/api/"

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.dropped < self.drops:
            self.dropped += 1
            await reader.read(1)  # the request has started to arrive...
            writer.transport.abort()  # ... and the connection is reset
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def test_web_client__retries_rate_limits_server_errors_and_resets() -> None:
    client = bolt_app.web_client(_settings("http://127.0.0.1:1/api/"))
    kinds = {type(h): h.max_retry_count for h in client.retry_handlers}
    assert kinds == {
        AsyncRateLimitErrorRetryHandler: bolt_app.RATE_LIMIT_RETRIES,
        AsyncServerErrorRetryHandler: bolt_app.SERVER_ERROR_RETRIES,
        AsyncConnectionErrorRetryHandler: bolt_app.CONNECTION_RETRIES,
    }
    assert all(n >= 1 for n in kinds.values())


async def test_web_client__a_429_waits_out_retry_after_and_posts_once(
    fake: fake_slack.FakeSlack,
) -> None:
    client = bolt_app.web_client(_settings(fake.api_url))
    fake.fail_next("chat.postMessage", status=429, retry_after=1)
    started = time.monotonic()

    answer = await client.chat_postMessage(channel=APPROVALS, text="approve?")

    assert answer["ok"] is True
    assert time.monotonic() - started >= 1  # Retry-After was honoured
    assert [c.status for c in fake.calls("chat.postMessage")] == [429, 200]
    assert [m.text for m in fake.messages(APPROVALS)] == ["approve?"]


@pytest.mark.parametrize("status", [500, 503])
async def test_web_client__a_server_error_is_retried_and_posts_once(
    fake: fake_slack.FakeSlack, status: int
) -> None:
    client = bolt_app.web_client(_settings(fake.api_url))
    fake.fail_next("chat.postMessage", status=status)

    await client.chat_postMessage(channel=APPROVALS, text="approve?")

    assert [c.status for c in fake.calls("chat.postMessage")] == [status, 200]
    assert [m.text for m in fake.messages(APPROVALS)] == ["approve?"]


async def test_web_client__a_reset_connection_is_retried_and_posts_once(
    fake: fake_slack.FakeSlack,
) -> None:
    relay = DropFirst(urlsplit(fake.api_url).port or 0)
    async with relay as api_url:
        client = bolt_app.web_client(_settings(api_url))
        await client.chat_postMessage(channel=APPROVALS, text="approve?")

    assert relay.dropped == 1
    assert [c.status for c in fake.calls("chat.postMessage")] == [200]
    assert [m.text for m in fake.messages(APPROVALS)] == ["approve?"]


# -- through the running bot -----------------------------------------------------------


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[BotWorld]:
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}") as w:
        yield w


async def test_bot__a_rate_limited_card_is_posted_in_the_same_delivery_pass(
    world: BotWorld,
) -> None:
    reply = await world.command(REP, f"ask {ASK}")
    assert "Started run" in reply.text, reply.text
    [run] = await runs.list_runs(world.db, user_id=REP, limit=1)
    world.fake.fail_next("chat.postMessage", status=429, retry_after=1)

    await world.deliver()  # one pass: the outbox's own retry would wait for a later one

    card = world.card(run.pending_token or "")
    assert card.channel == APPROVALS
    assert [c.status for c in world.fake.calls("chat.postMessage")] == [429, 200]


async def test_bot__decline_form_opens_after_a_rate_limited_views_open(world: BotWorld) -> None:
    reply = await world.command(REP, f"ask {ASK}")
    assert "Started run" in reply.text, reply.text
    [run] = await runs.list_runs(world.db, user_id=REP, limit=1)
    await world.deliver()
    token = (await runs.get(world.db, run.id)).pending_token or ""
    world.fake.fail_next("views.open", status=429, retry_after=1)

    clicked = await world.click(REP, ids.DECLINE_ACTION, token)

    assert clicked.status == 200 and clicked.ephemerals == []  # no "could not open" notice
    assert [c.status for c in world.fake.calls("views.open")] == [429, 200]
    [view] = world.fake.views
    assert view.view["callback_id"] == ids.DECLINE_REASON_CALLBACK
    assert view.view["private_metadata"] == token
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
