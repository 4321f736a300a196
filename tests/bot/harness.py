"""The real Bolt app over real HTTP, against the Slack stand-in, with the quotes example.

``bot_world(url)`` starts FakeSlack, builds the server with
``bot.server.build_server`` (signature verification on), serves it on
127.0.0.1:0 and yields a ``BotWorld`` whose helpers send signed slash
commands, button clicks and modal submissions the way Slack does, wait for
the work started after each ack, and deliver the outbox.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
from aiohttp import web

from bot import config, ids, server
from bot.outbox import relay
from bot.sandbox import FakeSlack, fake_slack, signing
from bot.services import Services
from examples import quotes
from examples.crm import CRM
from resume.apps import App
from resume.model import Model
from store import claims, engine, runs
from store.records import Approval, Run
from store.states import RunState

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-signoff-test"
APPROVALS = "C0APPROVALS"
COMMAND_CHANNEL = "C0GENERAL"
REP, OTHER = "U0REP", "U0OTHER"
ASK = "draft a quote for Henderson, 200 of SKU-4411"


@dataclass
class Reply:
    """What a request got back: the HTTP answer and the ephemerals it caused."""

    status: int
    body: str
    ephemerals: list[fake_slack.Ephemeral] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text the person saw: the ack's body, else the ephemerals, newest last."""
        if self.body:
            try:
                data = json.loads(self.body)
            except ValueError:
                data = {}
            if isinstance(data, dict) and data.get("text"):
                return str(data["text"])
        return "\n".join(e.text for e in self.ephemerals)


@dataclass
class BotWorld:
    fake: FakeSlack
    services: Services
    crm: CRM
    url: str
    http: aiohttp.ClientSession

    @property
    def db(self) -> engine.Database:
        return self.services.rt.db

    # -- raw requests ------------------------------------------------------------

    async def post(
        self, body: str, *, secret: str = SECRET, timestamp: int | None = None
    ) -> tuple[int, str]:
        headers = signing.signed_headers(secret, body, timestamp)
        async with self.http.post(self.url + ids.EVENTS_PATH, data=body.encode(),
                                  headers=headers) as response:
            return response.status, await response.text()

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.http.get(self.url + path) as response:
            return response.status, await response.json()

    async def _send(self, body: str, user: str) -> Reply:
        before = {e.ts for e in self.fake.ephemerals(user)}
        status, text = await self.post(body)
        await self.settle()
        new = [e for e in self.fake.ephemerals(user) if e.ts not in before]
        return Reply(status, text, new)

    async def settle(self) -> None:
        """Wait for every listener and background run started so far."""
        await self.services.drain(timeout=30)

    # -- Slack-shaped requests ---------------------------------------------------

    async def command(self, user: str, text: str) -> Reply:
        response_url = self.fake.response_url(COMMAND_CHANNEL, user=user)
        body = signing.slash_command_body(user, text, COMMAND_CHANNEL, response_url,
                                          signing.new_trigger_id())
        return await self._send(body, user)

    def click_body(self, user: str, action: str, token: str) -> str:
        card = self.card(token)
        response_url = self.fake.response_url(card.channel, message_ts=card.ts, user=user)
        return signing.block_actions_body(
            user, action, token, card.channel, card.ts, response_url, signing.new_trigger_id(),
            {"type": "message", "ts": card.ts, "text": card.text, "blocks": card.blocks},
        )

    async def click(self, user: str, action: str, token: str) -> Reply:
        return await self._send(self.click_body(user, action, token), user)

    async def submit_decline(self, user: str, token: str, reason: str | None) -> Reply:
        values = {ids.DECLINE_REASON_BLOCK: {ids.DECLINE_REASON_ACTION: {
            "type": "plain_text_input", "value": reason}}}
        body = signing.view_submission_body(user, ids.DECLINE_REASON_CALLBACK, token, values)
        return await self._send(body, user)

    async def asked(self, user: str = REP, question: str = ASK) -> Run:
        """`/signoff ask`, the card delivered; the suspended run."""
        reply = await self.command(user, f"ask {question}")
        assert reply.status == 200 and "Started run" in reply.text, reply.text
        [run] = await runs.list_runs(self.db, user_id=user, limit=1)
        run = await runs.get(self.db, run.id)
        assert run.state is RunState.suspended, run.halt_reason
        await self.deliver()
        return run

    # -- the outbox and what Slack shows -----------------------------------------

    async def deliver(self, now: datetime | None = None) -> None:
        """Deliver every outbox row due at ``now`` (default: now) to the stand-in."""
        for _ in range(100):
            report = await relay.deliver_due(self.db, self.services.client, now=now)
            if report.picked == 0:
                return
        raise AssertionError("the outbox never emptied")

    def card(self, token: str) -> fake_slack.Message:
        """The message holding the approval card for ``token`` (as it stands now)."""
        found = [m for m in self.fake.messages() if token in json.dumps(m.blocks)]
        assert found, f"no card for token {token[:6]}… among {len(self.fake.messages())} messages"
        return found[0]

    def thread(self, parent: fake_slack.Message) -> list[fake_slack.Message]:
        return [m for m in self.fake.messages(parent.channel)
                if m.thread_ts == parent.ts and m.ts != parent.ts]

    async def approval(self, token: str) -> Approval:
        found = await claims.approval(self.db, token)
        assert found is not None
        return found


async def close_opened(from_env: Any) -> None:
    """Dispose of the database an example's cached ``*_from_env`` opened, and forget it."""
    if from_env.cache_info().currsize:
        await from_env().db.dispose()
    from_env.cache_clear()


def has_buttons(message: fake_slack.Message) -> bool:
    return any(b.get("block_id") == ids.ACTIONS_BLOCK for b in message.blocks)


def has_actions(message: fake_slack.Message) -> bool:
    """Any actions block at all, the card's or another (a dead card must have none)."""
    return any(block["type"] == "actions" for block in message.blocks)


def settings_for(url: str, fake: FakeSlack, **overrides: Any) -> config.Settings:
    defaults: dict[str, Any] = {"SIGNOFF_APPROVALS_CHANNEL": APPROVALS}
    return config.load_settings(
        SLACK_BOT_TOKEN=TOKEN, SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=fake.api_url,
        DATABASE_URL=url, **{**defaults, **overrides},
    )


@asynccontextmanager
async def bot_world(
    url: str,
    *,
    model: Model | None = None,
    build_app: Callable[[CRM, Model | None], App] = quotes.build,
    **overrides: Any,
) -> AsyncIterator[BotWorld]:
    """The bot serving ``build_app(crm, model)`` (the quotes example by default)."""
    async with FakeSlack() as fake:
        db = engine.connect(url)
        crm = CRM(db)
        web_app: web.Application | None = None
        try:
            web_app, services = await server.build_server(
                settings_for(url, fake, **overrides), app=build_app(crm, model), db=db)
            await crm.setup()
            runner = web.AppRunner(web_app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            try:
                async with aiohttp.ClientSession() as http:
                    yield BotWorld(fake, services, crm, f"http://127.0.0.1:{port}", http)
            finally:
                # A failed test may leave work in flight: let it finish before the pool goes.
                with contextlib.suppress(TimeoutError):
                    await services.drain(timeout=30)
                await runner.cleanup()
        finally:
            await db.dispose()
