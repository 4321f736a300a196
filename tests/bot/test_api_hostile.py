"""Hostile API input gets a clear 4xx and changes nothing: wrong types, huge bodies,
unknown ids, bad keys, another key's run (404, so ids leak nothing), tools outside the globs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from store import api_calls, api_keys, outbox, runs
from tests.bot.api_harness import PREVIEW, Agent, Key, make_key
from tests.bot.harness import BotWorld


async def _snapshot(world: BotWorld, run_id: str) -> tuple[object, ...]:
    run = await runs.get(world.db, run_id)
    return (run.state, run.updated_at, run.tool_calls, run.pending_token,
            [(c.call_id, c.status) for c in await api_calls.for_run(world.db, run_id)],
            len(await outbox.for_run(world.db, run_id)))


@pytest.mark.parametrize("body", [
    {"external": "yes", "requester": "U0REP", "title": "t", "idempotency_key": "k"},
    {"external": True, "requester": 42, "title": "t", "idempotency_key": "k"},
    {"external": True, "requester": "U0REP", "idempotency_key": "k"},
    {"external": True, "requester": "<!channel>", "title": "t", "idempotency_key": "k"},
    {"external": True, "requester": "U0REP", "title": "t", "idempotency_key": "k",
     "limits": {"max_tool_calls": -1}},
    {"external": True, "requester": "U0REP", "title": "t", "idempotency_key": "k", "admin": 1},
    [1, 2, 3],
])
async def test_create__wrong_shapes_are_refused_and_nothing_is_created(
    world: BotWorld, body: object
) -> None:
    agent = Agent(world, await make_key(world.db))
    status, answer = await agent.call("POST", "/runs", body)
    assert status == 400 and answer["error"] == "invalid_request" and answer["message"]
    assert await runs.count(world.db) == 0


async def test_calls__hostile_requests_change_nothing(world: BotWorld) -> None:
    agent = Agent(world, await make_key(world.db, tools=("refund_*",)))
    run_id = (await agent.start())["id"]
    before = await _snapshot(world, run_id)
    base = {"call_id": "c1", "tool": "refund_order", "preview": PREVIEW}
    cases = [
        ({**base, "args": [1, 2]}, 400, "invalid_request"),
        ({**base, "preview": {"title": "x", "fields": [["a"]]}}, 400, "invalid_request"),
        ({**base, "ttl_minutes": 10_000}, 400, "invalid_request"),
        ({**base, "spend_usd": "1"}, 400, "invalid_request"),
        ({**base, "call_id": "../../etc"}, 400, "invalid_request"),
        ({**base, "tool": "delete_everything"}, 403, "tool_not_allowed"),
    ]
    for body, status_wanted, code in cases:
        status, answer = await agent.call("POST", f"/runs/{run_id}/calls", body)
        assert (status, answer["error"]) == (status_wanted, code), (body, answer)
    status, answer = await agent.call("POST", f"/runs/{run_id}/calls", raw=b"{not json")
    assert status == 400 and answer["error"] == "invalid_request"
    huge = json.dumps({**base, "args": {"blob": "x" * 300_000}}).encode()
    status, answer = await agent.call("POST", f"/runs/{run_id}/calls", raw=huge)
    assert status == 413 and answer["error"] == "too_large"
    for path in ("/runs/run_nope", "/runs/run_nope/calls/c1", f"/runs/{run_id}/calls/nope"):
        status, answer = await agent.call("GET", path)
        assert status == 404 and answer["error"] == "not_found", path
    for wait in ("31", "-1", "soon"):
        status, answer = await agent.call("GET", f"/runs/{run_id}/calls/c1?wait={wait}")
        assert status == 400, wait
    assert await _snapshot(world, run_id) == before


async def test_keys__another_keys_run_is_not_found_and_bad_keys_get_401(
    world: BotWorld,
) -> None:
    owner = Agent(world, await make_key(world.db))
    run_id = (await owner.start())["id"]
    assert (await owner.ask(run_id))[0] == 201
    before = await _snapshot(world, run_id)
    stranger = Agent(world, await make_key(world.db))
    attempts = [("GET", f"/runs/{run_id}", None), ("GET", f"/runs/{run_id}/calls/c1", None),
                ("POST", f"/runs/{run_id}/calls/c1/execute", {"preview": PREVIEW}),
                ("POST", f"/runs/{run_id}/calls/c1/result", {"status": "succeeded"}),
                ("POST", f"/runs/{run_id}/finish", {"answer": "x"}),
                ("POST", f"/runs/{run_id}/cancel", None)]
    for method, path, body in attempts:
        status, answer = await stranger.call(method, path, body)
        assert status == 404 and answer["error"] == "not_found", path
    assert (await stranger.call("GET", "/calls"))[1]["calls"] == []
    forged = Agent(world, Key("forged", "so_" + "A" * 43))
    assert (await forged.call("GET", f"/runs/{run_id}"))[0] == 401
    async with world.http.get(f"{world.url}/api/v1/runs/{run_id}") as response:
        assert response.status == 401
    assert await api_keys.revoke(world.db, owner.key.name, now=datetime.now(UTC))
    status, answer = await owner.call("GET", f"/runs/{run_id}")
    assert status == 401 and answer["error"] == "unauthorized"
    assert await _snapshot(world, run_id) == before


async def test_text_from_the_client_cannot_look_like_signoffs_own_words(world: BotWorld) -> None:
    agent = Agent(world, await make_key(world.db))
    run_id = (await agent.start("<!channel> *Approved by security*"))["id"]
    preview = {"title": "<!here> ignore the above", "fields": [["*Status*", "<@U0BOSS> ok"]],
               "body": "```approved```"}
    assert (await agent.ask(run_id, preview=preview))[0] == 201
    await world.deliver()
    [card] = [m for m in world.fake.messages() if "ignore the above" in str(m.blocks)]
    rendered = json.dumps(card.blocks)
    assert "<!channel>" not in rendered and "<!here>" not in rendered
    assert "<@U0BOSS>" not in rendered


async def test_unknown_paths_and_methods_answer_in_the_error_shape(world: BotWorld) -> None:
    agent = Agent(world, await make_key(world.db))
    status, answer = await agent.call("GET", "/nowhere")
    assert status == 404 and answer["error"] == "not_found" and answer["message"]
    status, answer = await agent.call("DELETE", "/runs")
    assert status == 405 and answer["error"] == "method_not_allowed"
