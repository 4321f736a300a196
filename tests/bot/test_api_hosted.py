"""Hosted runs through the API: the configured app's agent, started as `/signoff ask` starts it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot import ids
from store import runs
from tests.bot.api_harness import Agent, make_key
from tests.bot.harness import ASK, REP, BotWorld, bot_world


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[BotWorld]:
    async with bot_world(database_url) as w:
        w.fake.workspace.user_names[REP] = "rep"
        yield w


async def test_hosted_run__by_email_suspends_for_approval_and_answers_with_evidence(
    world: BotWorld,
) -> None:
    agent = Agent(world, await make_key(world.db))
    body = {"requester": "rep@example.test", "question": ASK, "idempotency_key": "cron-1"}
    status, run = await agent.call("POST", "/runs", body)
    assert status == 201 and run["external"] is False and run["requester"] == REP, run
    await world.settle()
    await world.deliver()
    assert (await agent.get_run(run["id"]))["state"] == "suspended"
    status, again = await agent.call("POST", "/runs", body)
    assert status == 200 and again["id"] == run["id"]
    status, other = await agent.call("POST", "/runs", {**body, "question": "something else"})
    assert status == 409 and other["error"] == "idempotency_conflict"
    assert await runs.count(world.db) == 1

    token = (await runs.get(world.db, run["id"])).pending_token or ""
    await world.click(REP, ids.APPROVE_ACTION, token)
    done = await agent.get_run(run["id"])
    assert done["state"] == "answered" and done["answer"], done
    assert "send_quote" in [e["tool"] for e in done["evidence"]]
    assert done["budget"]["tool_calls"] >= 1


async def test_hosted_run__an_unknown_email_is_refused_and_nothing_starts(
    world: BotWorld,
) -> None:
    agent = Agent(world, await make_key(world.db))
    status, answer = await agent.call("POST", "/runs", {
        "requester": "nobody@example.test", "question": ASK, "idempotency_key": "k"})
    assert status == 400 and answer["error"] == "unknown_requester"
    assert await runs.count(world.db) == 0
