"""An external agent's call through the HTTP API of a real server, approved in Slack.

The real Bolt app (signature verification on) and the API on one port, the
Slack stand-in, both dialects. Every status a call goes through is checked
where a user sees it: the API's answer, the card in Slack, the ledger.
"""

from __future__ import annotations

import asyncio

from bot import ids
from store import api_calls, ledger, runs
from store.states import LedgerStatus, RunState
from tests.bot.api_harness import PREVIEW, Agent, pending
from tests.bot.harness import REP, BotWorld, has_buttons


async def test_external_call__approved_executed_once_and_answered(
    world: BotWorld, agent: Agent
) -> None:
    run_id, token = await pending(world, agent)
    card = world.card(token)
    assert has_buttons(card) and "Refund order A-1" in str(card.blocks)

    waiting = asyncio.create_task(agent.get_call(run_id, wait=20))
    await asyncio.sleep(0)  # the long-poll is in flight before the click
    await world.click(REP, ids.APPROVE_ACTION, token)
    approved = await waiting
    assert approved["status"] == "approved" and approved["decision"]["by"] == REP

    status, claim = await agent.execute(run_id)
    assert status == 200 and claim["status"] == "executing", claim
    assert claim["idempotency_key"] == f"{run_id}:c1" and claim["lease_seconds"] > 0
    again_status, again = await agent.execute(run_id)
    assert again_status == 409 and again["error"] == "already_executing", again

    status, done = await agent.result(run_id, result={"refund_id": "R-9"},
                                      evidence={"refund_id": "R-9"})
    assert status == 200 and done["status"] == "succeeded"
    late_status, late = await agent.execute(run_id)
    assert late_status == 409 and late["error"] == "already_executed"
    [entry] = await ledger.for_run(world.db, run_id)
    assert entry.status is LedgerStatus.succeeded and entry.idempotency_key == f"{run_id}:c1"
    await world.deliver()
    assert any("R-9" in str(m.blocks) for m in world.thread(world.card(token)))

    status, finished = await agent.call("POST", f"/runs/{run_id}/finish",
                                        {"answer": "Refunded A-1", "requires": ["refund_order"]})
    assert status == 200 and finished["state"] == "answered", finished
    assert finished["evidence"] == [{"call_id": "c1", "tool": "refund_order",
                                     "result": {"refund_id": "R-9"}}]
    assert finished["budget"]["tool_calls"] == 1


async def test_external_call__declined_is_final_and_never_runs(
    world: BotWorld, agent: Agent
) -> None:
    run_id, token = await pending(world, agent)
    await world.click(REP, ids.DECLINE_ACTION, token)
    await world.submit_decline(REP, token, "wrong order")
    call = await agent.get_call(run_id)
    assert call["status"] == "declined" and call["decision"]["reason"] == "wrong order"
    status, refused = await agent.execute(run_id)
    assert status == 409 and refused["error"] == "declined" and refused["status"] == "declined"
    assert await ledger.for_run(world.db, run_id) == []
    status, failed = await agent.call("POST", f"/runs/{run_id}/finish",
                                      {"answer": "done", "requires": ["refund_order"]})
    assert status == 200 and failed["state"] == "failed" and failed["reason"] == "incomplete"
    await world.deliver()
    (notice,) = [str(m.blocks) for m in world.fake.messages() if "Never ran" in str(m.blocks)]
    assert "refund_order" in notice
    assert "the agent that started this run decides" in notice
    assert "Ask again" not in notice, notice


async def test_external_call__same_call_id_returns_the_same_call(
    world: BotWorld, agent: Agent
) -> None:
    run_id, _ = await pending(world, agent)
    status, again = await agent.ask(run_id)
    assert status == 200 and again["status"] == "pending"
    status, other = await agent.ask(run_id, preview={**PREVIEW, "title": "Another"})
    assert status == 409 and other["error"] == "idempotency_conflict"
    assert len(await api_calls.for_run(world.db, run_id)) == 1
    assert len([m for m in world.fake.messages() if has_buttons(m)]) == 1


async def test_external_run__same_idempotency_key_same_run_another_body_409(
    world: BotWorld, agent: Agent
) -> None:
    body = {"external": True, "requester": REP, "title": "Refund 4411",
            "idempotency_key": "ticket-4411", "limits": {"max_tool_calls": 3}}
    status, first = await agent.call("POST", "/runs", body)
    assert status == 201 and first["state"] == "running" and first["id"].startswith("run_")
    assert first["budget"]["max_tool_calls"] == 3
    status, again = await agent.call("POST", "/runs", body)
    assert status == 200 and again["id"] == first["id"]
    status, other = await agent.call("POST", "/runs", {**body, "title": "Refund 4412"})
    assert status == 409 and other["error"] == "idempotency_conflict"
    assert await runs.count(world.db) == 1
    assert (await runs.get(world.db, first["id"])).heartbeat_at is None  # nobody here holds it


async def test_external_run__concurrent_creates_with_one_key_make_one_run(
    world: BotWorld, agent: Agent
) -> None:
    body = {"external": True, "requester": REP, "title": "Refund", "idempotency_key": "same"}
    answers = await asyncio.gather(*(agent.call("POST", "/runs", body) for _ in range(6)))
    assert sorted(s for s, _ in answers) == [200] * 5 + [201]
    assert len({a["id"] for _, a in answers}) == 1 and await runs.count(world.db) == 1


async def test_external_call__a_failed_result_is_recorded_and_the_contract_fails(
    world: BotWorld, agent: Agent
) -> None:
    run_id, token = await pending(world, agent)
    await world.click(REP, ids.APPROVE_ACTION, token)
    assert (await agent.execute(run_id))[0] == 200
    status, failed = await agent.result(run_id, status="failed", result={"error": "card declined"})
    assert status == 200 and failed["status"] == "failed"
    status, again = await agent.result(run_id, status="succeeded")
    assert status == 409 and again["error"] == "not_executing"
    [entry] = await ledger.for_run(world.db, run_id)
    assert entry.status is LedgerStatus.failed
    status, ended = await agent.call("POST", f"/runs/{run_id}/finish",
                                     {"answer": "tried", "requires": ["refund_order"]})
    assert status == 200 and (ended["state"], ended["reason"]) == ("failed", "incomplete")
    assert ended["evidence"] == []


async def test_external_call__finish_waits_for_an_executing_call(
    world: BotWorld, agent: Agent
) -> None:
    run_id, token = await pending(world, agent)
    await world.click(REP, ids.APPROVE_ACTION, token)
    assert (await agent.execute(run_id))[0] == 200
    status, refused = await agent.call("POST", f"/runs/{run_id}/finish", {"answer": "x"})
    assert status == 409 and refused["error"] == "calls_in_flight"
    assert (await runs.get(world.db, run_id)).state is RunState.running
