"""Driving the HTTP API of a real server (``tests.bot.harness.bot_world``) as an agent would."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot import ids
from bot.api import auth
from store import api_keys, runs
from store.engine import Database
from store.states import RunState
from tests.bot.harness import REP, BotWorld

PREVIEW = {"title": "Refund order A-1", "fields": [["Order", "A-1"], ["Amount", "$40.00"]],
           "body": None}


@dataclass(frozen=True)
class Key:
    name: str
    secret: str  #: the bearer key, as the agent holds it
    webhook_secret: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


async def make_key(db: Database, name: str | None = None, *, tools: tuple[str, ...] = ("*",),
                   webhook: str | None = None) -> Key:
    secret = auth.new_key()
    webhook_secret = "whsec_" + "c2lnbm9mZi10ZXN0LXdlYmhvb2stc2VjcmV0LTMyYg==" if webhook else None
    name = name or f"agent-{secrets.token_hex(3)}"
    await api_keys.create(db, key_id=f"key_{secrets.token_hex(8)}", name=name,
                          key_hash=auth.key_hash(secret), tools=tools, webhook_url=webhook,
                          webhook_secret=webhook_secret, now=datetime.now(UTC))
    return Key(name, secret, webhook_secret)


@dataclass
class Agent:
    """One API key's view of the server."""

    world: BotWorld
    key: Key

    async def call(self, method: str, path: str, body: Any = None, *,
                   raw: bytes | None = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": self.key.headers}
        if raw is not None:
            kwargs["data"] = raw
        elif body is not None:
            kwargs["json"] = body
        async with self.world.http.request(method, self.world.url + "/api/v1" + path,
                                           **kwargs) as response:
            return response.status, await response.json()

    async def start(self, title: str = "Refund for ticket 4411", *, requester: str = "U0REP",
                    idempotency_key: str | None = None, **extra: Any) -> dict[str, Any]:
        status, run = await self.call("POST", "/runs", {
            "external": True, "requester": requester, "title": title,
            "idempotency_key": idempotency_key or secrets.token_hex(8), **extra})
        assert status == 201, run
        return dict(run)

    async def ask(self, run_id: str, call_id: str = "c1", *, tool: str = "refund_order",
                  preview: dict[str, Any] | None = None, **extra: Any) -> tuple[int, Any]:
        return await self.call("POST", f"/runs/{run_id}/calls", {
            "call_id": call_id, "tool": tool, "args": {"order_id": "A-1", "amount": 40.0},
            "preview": preview or PREVIEW, **extra})

    async def execute(self, run_id: str, call_id: str = "c1", *,
                      preview: dict[str, Any] | None = None, **extra: Any) -> tuple[int, Any]:
        return await self.call("POST", f"/runs/{run_id}/calls/{call_id}/execute",
                               {"preview": preview or PREVIEW, **extra})

    async def result(self, run_id: str, call_id: str = "c1", status: str = "succeeded",
                     **extra: Any) -> tuple[int, Any]:
        return await self.call("POST", f"/runs/{run_id}/calls/{call_id}/result",
                               {"status": status, **extra})

    async def get_call(self, run_id: str, call_id: str = "c1", wait: float = 0) -> dict[str, Any]:
        status, call = await self.call("GET", f"/runs/{run_id}/calls/{call_id}?wait={wait}")
        assert status == 200, call
        return dict(call)

    async def get_run(self, run_id: str) -> dict[str, Any]:
        status, run = await self.call("GET", f"/runs/{run_id}")
        assert status == 200, run
        return dict(run)


async def pending(world: BotWorld, agent: Agent, **start: Any) -> tuple[str, str]:
    """An external run (``start``: ``Agent.start``'s arguments) with call c1 pending and its
    card posted: (run id, token)."""
    run = await agent.start(**start)
    status, call = await agent.ask(run["id"])
    assert status == 201 and call["status"] == "pending", call
    await world.deliver()
    stored = await runs.get(world.db, run["id"])
    assert stored.state is RunState.suspended and stored.pending_token
    return run["id"], stored.pending_token


async def approved(world: BotWorld, agent: Agent, **start: Any) -> tuple[str, str]:
    """``pending``, then REP approves c1 on the card: (run id, token)."""
    run_id, token = await pending(world, agent, **start)
    await world.click(REP, ids.APPROVE_ACTION, token)
    assert (await agent.get_call(run_id))["status"] == "approved"
    return run_id, token
