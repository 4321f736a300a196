"""The real Bolt app over Socket Mode, against the stand-in's WebSocket, with the quotes example.

``socket_world(url)`` is ``harness.bot_world`` with ``SLACK_APP_TOKEN`` set: the
server is built by ``bot.server.build_server``, serves HTTP on 127.0.0.1:0 (for
/healthz, /readyz, /metrics) and opens its Socket Mode connection through
``bot.server.open_socket_mode``, exactly as ``signoff serve`` does. Commands,
clicks and submissions then travel as envelopes over the WebSocket, not as
signed HTTP requests.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from bot import server
from bot.sandbox import FakeSlack
from bot.sandbox.socket_mode import SocketModeServer
from examples import quotes
from examples.crm import CRM
from store import engine
from tests.bot.harness import BotWorld, Reply, settings_for

APP_TOKEN = "xapp-1-A0SIGNOFF-1-socketsecret"


@dataclass
class SocketWorld(BotWorld):
    web_app: web.Application | None = None

    @property
    def socket(self) -> SocketModeServer:
        return self.fake.socket_mode

    async def _send(self, body: str, user: str) -> Reply:
        before = {e.ts for e in self.fake.ephemerals(user)}
        answer = await self.socket.deliver_form(body)
        await self.settle()
        new = [e for e in self.fake.ephemerals(user) if e.ts not in before]
        shown = answer.get("body")
        return Reply(int(answer["status"]), json.dumps(shown) if shown else "", new)


@asynccontextmanager
async def socket_world(url: str, **overrides: Any) -> AsyncIterator[SocketWorld]:
    async with FakeSlack() as fake:
        db = engine.connect(url)
        crm = CRM(db)
        try:
            settings = settings_for(url, fake, SLACK_APP_TOKEN=APP_TOKEN, **overrides)
            web_app, services = await server.build_server(settings, app=quotes.build(crm), db=db)
            await crm.setup()
            runner = web.AppRunner(web_app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            port = runner.addresses[0][1]
            try:
                await server.open_socket_mode(web_app, settings)
                await fake.socket_mode.connected()
                async with aiohttp.ClientSession() as http:
                    yield SocketWorld(fake, services, crm, f"http://127.0.0.1:{port}", http,
                                      web_app)
            finally:
                await server.close_socket_mode(web_app)
                with contextlib.suppress(TimeoutError):
                    await services.drain(timeout=30)
                await runner.cleanup()
        finally:
            await db.dispose()
