"""Webhooks through the outbox: a receiver that is down gets every event once it is back,
signed per Standard Webhooks (verified with the ``standardwebhooks`` library)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import pytest
from aiohttp import web
from sqlalchemy import update
from standardwebhooks import Webhook

from store import schema
from store.records import OutboxRow
from store.states import OutboxState
from tests.bot.api_harness import Agent, approved, make_key
from tests.bot.harness import BotWorld


class Receiver:
    """A webhook endpoint on a fixed local port that can be down, then up."""

    def __init__(self) -> None:
        self.received: list[tuple[bytes, dict[str, str]]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _hook(self, request: web.Request) -> web.Response:
        self.received.append((await request.read(), dict(request.headers)))
        return web.Response(status=204)

    async def up(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def down(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.up()  # to learn a free port, then down until the test says so
    await r.down()
    try:
        yield r
    finally:
        await r.down()


async def _hooks(world: BotWorld) -> list[OutboxRow]:
    async with world.db.read() as conn:
        ids_ = (await conn.execute(schema.outbox.select().where(
            schema.outbox.c.kind == "webhook"))).mappings().all()
    return [OutboxRow.from_row(r) for r in ids_]


async def _all_due_now(world: BotWorld) -> None:
    """As if the retry backoff had passed (set by writing rows, not by sleeping)."""
    async with world.db.write() as conn:
        await conn.execute(update(schema.outbox).where(schema.outbox.c.kind == "webhook")
                           .values(next_attempt_at=datetime.now(UTC)))


async def _until(check: Callable[[], Awaitable[bool]], seconds: float = 15) -> None:
    async with asyncio.timeout(seconds):
        while not await check():
            await asyncio.sleep(0.05)


async def test_webhooks__a_receiver_down_gets_its_events_afterwards_signed(
    world: BotWorld, receiver: Receiver
) -> None:
    key = await make_key(world.db, webhook=f"http://127.0.0.1:{receiver.port}/hook")
    agent = Agent(world, key)
    run_id, _ = await approved(world, agent)
    assert (await agent.execute(run_id))[0] == 200
    assert (await agent.result(run_id))[0] == 200
    assert (await agent.call("POST", f"/runs/{run_id}/finish",
                             {"answer": "done", "requires": ["refund_order"]}))[0] == 200

    async def tried_twice() -> bool:
        # Rows of one run go out in order: the first is retried, the rest wait behind it.
        rows = await _hooks(world)
        if any(r.attempts >= 2 for r in rows):
            return True
        await _all_due_now(world)
        return False

    await _until(tried_twice)  # the sender kept trying while the receiver was down
    assert receiver.received == []
    await receiver.up()
    await _all_due_now(world)

    async def delivered() -> bool:
        return all(r.state is OutboxState.sent for r in await _hooks(world))

    await _until(delivered)
    assert key.webhook_secret is not None
    verifier = Webhook(key.webhook_secret)
    events = [verifier.verify(body, headers) for body, headers in receiver.received]
    assert [e["type"] for e in events] == ["call.decided", "run.finished"]
    assert events[0]["data"]["call_id"] == "c1" and events[0]["data"]["status"] == "approved"
    assert events[1]["data"]["state"] == "answered"
    forged = json.dumps({**events[0], "type": "run.finished"})
    with pytest.raises(Exception, match="signature"):
        verifier.verify(forged, receiver.received[0][1])
