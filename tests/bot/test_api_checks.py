"""The execution claim's re-checks for an external call, and the sweeps that reach it.

A changed preview asks again (a diff card in the thread, then a fresh
decision, then exactly one execution); a failed guard blocks and the card
says so; a requester no longer permitted halts the run; budget, expiry and
cancel go through the same entries as a hosted run's.
"""

from __future__ import annotations

from datetime import timedelta

from bot import ids
from resume import expire
from store import api_calls, ledger, runs
from store.states import CallStatus, RunState
from tests.bot.api_harness import PREVIEW, Agent, approved
from tests.bot.harness import REP, BotWorld, has_buttons

CHANGED = {**PREVIEW, "fields": [["Order", "A-1"], ["Amount", "$400.00"]]}


async def test_execute__changed_preview_asks_again_then_runs_once(
    world: BotWorld, agent: Agent
) -> None:
    run_id, first = await approved(world, agent)
    status, changed = await agent.execute(run_id, preview=CHANGED)
    assert status == 409 and changed["error"] == "changed", changed
    assert changed["changes"] == [{"field": "Amount", "old": "$40.00", "new": "$400.00"}]
    assert (await agent.get_call(run_id))["status"] == "pending"
    await world.deliver()
    second = (await runs.get(world.db, run_id)).pending_token or ""
    assert second and second != first
    diff_card = world.card(second)
    assert diff_card.thread_ts == world.card(first).ts and has_buttons(diff_card)
    assert "$400.00" in str(diff_card.blocks) and "$40.00" in str(diff_card.blocks)
    assert not has_buttons(world.card(first))
    stale_status, stale = await agent.execute(run_id, preview=CHANGED)
    assert stale_status == 409 and stale["error"] == "pending"

    await world.click(REP, ids.APPROVE_ACTION, second)
    status, claim = await agent.execute(run_id, preview=CHANGED)
    assert status == 200 and claim["status"] == "executing"
    assert (await agent.execute(run_id, preview=CHANGED))[0] == 409
    assert [e.call_id for e in await ledger.for_run(world.db, run_id)] == ["c1"]


async def test_execute__failed_guard_blocks_and_the_card_says_so(
    world: BotWorld, agent: Agent
) -> None:
    run_id, token = await approved(world, agent)
    status, blocked = await agent.execute(
        run_id, guard={"ok": False, "code": "credit_hold", "message": "account on credit hold"})
    assert status == 409 and blocked["error"] == "blocked" and blocked["code"] == "credit_hold"
    assert (await agent.get_call(run_id))["status"] == "blocked"
    await world.deliver()
    card = world.card(token)
    assert "credit hold" in str(card.blocks) and not has_buttons(card)
    assert await ledger.for_run(world.db, run_id) == []
    assert (await runs.get(world.db, run_id)).state is RunState.running


async def test_execute__no_longer_permitted_halts_the_run(world: BotWorld, agent: Agent) -> None:
    run_id, _ = await approved(world, agent)
    status, refused = await agent.execute(run_id, permitted=False)
    assert status == 403 and refused["error"] == "no_longer_permitted"
    run = await runs.get(world.db, run_id)
    assert run.state is RunState.halted and run.halt_reason == "no_longer_permitted"
    assert await ledger.for_run(world.db, run_id) == []


async def test_budget__past_its_bound_the_run_halts_until_continued(
    world: BotWorld, agent: Agent
) -> None:
    run_id, _ = await approved(world, agent, limits={"max_tool_calls": 1})
    assert (await agent.execute(run_id))[0] == 200
    assert (await agent.result(run_id))[0] == 200
    status, over = await agent.ask(run_id, "c2")
    assert status == 409 and over["error"] == "budget_exceeded", over
    assert over["reason"] == "budget:tool_calls"
    assert (await agent.get_run(run_id))["state"] == "halted"
    assert await api_calls.get(world.db, run_id, "c2") is None

    reply = await world.command(REP, f"continue {run_id}")
    assert reply.status == 200
    run = await agent.get_run(run_id)
    assert run["state"] == "running" and run["budget"]["max_tool_calls"] > 1
    assert (await agent.ask(run_id, "c2"))[0] == 201


async def test_expiry__an_undecided_call_expires_with_its_card(
    world: BotWorld, agent: Agent
) -> None:
    run = await agent.start()
    assert (await agent.ask(run["id"], ttl_minutes=5))[0] == 201
    await world.deliver()
    stored = await runs.get(world.db, run["id"])
    assert stored.expires_at is not None
    later = stored.expires_at + timedelta(seconds=1)
    await expire.expire_suspended(world.services.rt, later)
    call = await agent.get_call(run["id"])
    assert call["status"] == "expired"
    status, refused = await agent.execute(run["id"])
    assert status == 409 and refused["error"] == "expired"
    await world.deliver(later)
    assert not has_buttons(world.card(stored.pending_token or ""))


async def test_cancel__the_open_card_loses_its_buttons_and_the_call_is_cancelled(
    world: BotWorld, agent: Agent
) -> None:
    run = await agent.start()
    assert (await agent.ask(run["id"]))[0] == 201
    await world.deliver()
    token = (await runs.get(world.db, run["id"])).pending_token or ""
    status, cancelled = await agent.call("POST", f"/runs/{run['id']}/cancel")
    assert status == 200 and cancelled["state"] == "failed" and cancelled["reason"] == "cancelled"
    assert (await api_calls.get(world.db, run["id"], "c1")).status is CallStatus.cancelled  # type: ignore[union-attr]
    await world.deliver()
    assert not has_buttons(world.card(token))
    late = await world.click(REP, ids.APPROVE_ACTION, token)
    assert late.status == 200
    assert (await agent.get_call(run["id"]))["status"] == "cancelled"


async def test_slack_cancel__an_external_runs_pending_call_is_cancelled_too(
    world: BotWorld, agent: Agent
) -> None:
    run = await agent.start()
    assert (await agent.ask(run["id"]))[0] == 201
    reply = await world.command(REP, f"cancel {run['id']}")
    assert reply.status == 200
    assert (await agent.get_run(run["id"]))["state"] == "failed"
    assert (await agent.get_call(run["id"]))["status"] == "cancelled"
    status, refused = await agent.execute(run["id"])
    assert status == 409 and refused["error"] == "cancelled"
