"""Slack requests over real HTTP into the real Bolt app (verification on), against the stand-in."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import pytest

from bot import ids
from bot.sandbox import signing
from examples import quotes
from resume import calls
from resume.messages import Message, ModelReply, ToolSpec
from store import engine, migrate, runs
from store.states import RunState
from tests.bot.harness import (
    APPROVALS,
    ASK,
    COMMAND_CHANNEL,
    OTHER,
    REP,
    BotWorld,
    bot_world,
    has_buttons,
)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[BotWorld]:
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}") as w:
        yield w


async def test_events__forged_signature_is_rejected_and_changes_nothing(world: BotWorld) -> None:
    run = await world.asked()
    body = world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or "")
    status, text = await world.post(body, secret="0" * 32)
    await world.settle()
    assert status == 401 and json.loads(text) == {"error": "invalid request"}
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert await world.crm.sent_count() == 0


async def test_events__stale_timestamp_is_rejected(world: BotWorld) -> None:
    run = await world.asked()
    body = world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or "")
    status, _ = await world.post(body, timestamp=int(time.time()) - 301)
    await world.settle()
    assert status == 401
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def test_approve__card_replaced_and_answer_with_evidence_in_thread(
    world: BotWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    card = world.card(token)
    assert card.channel == APPROVALS and has_buttons(card)
    reply = await world.click(REP, ids.APPROVE_ACTION, token)
    assert reply.status == 200 and reply.ephemerals == []
    await world.deliver()
    card = world.card(token)
    assert not has_buttons(card)
    assert "Approved by <@U0REP>" in json.dumps(card.blocks)
    thread = world.thread(card)
    assert len(thread) == 1
    answer = json.dumps(thread[0].blocks)
    assert "answered" in answer and "send_quote" in answer and "Henderson" in answer
    assert (await runs.get(world.db, run.id)).state is RunState.answered
    assert await world.crm.sent_count() == 1


async def test_approve__simultaneous_clicks_execute_once(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    bodies = [world.click_body(REP, ids.APPROVE_ACTION, token) for _ in range(2)]
    results = await asyncio.gather(*(world.post(b) for b in bodies))
    await world.settle()
    await world.deliver()
    assert [status for status, _ in results] == [200, 200]
    assert await world.crm.sent_count() == 1
    already = [e for e in world.fake.ephemerals(REP) if e.channel == APPROVALS]
    assert len(already) == 1 and "already approved by <@U0REP>" in already[0].text
    approved = [m for m in world.fake.messages() if "Approved by" in json.dumps(m.blocks)]
    assert len(approved) == 1
    assert (await runs.get(world.db, run.id)).state is RunState.answered


async def test_approve__second_click_after_the_first_is_told_who_won(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    await world.click(REP, ids.APPROVE_ACTION, token)
    again = await world.click(REP, ids.APPROVE_ACTION, token)
    assert "already approved by <@U0REP>" in again.text
    assert await world.crm.sent_count() == 1


async def test_approve__non_approver_changes_nothing(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    reply = await world.click(OTHER, ids.APPROVE_ACTION, token)
    assert "only <@U0REP> can" in reply.text and "Nothing changed" in reply.text
    await world.deliver()
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert has_buttons(world.card(token))
    assert await world.crm.sent_count() == 0


async def test_decline__reason_from_the_modal_reaches_the_model(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    opened = await world.click(REP, ids.DECLINE_ACTION, token)
    assert opened.status == 200 and opened.ephemerals == []
    [view] = world.fake.views
    assert view.view["callback_id"] == ids.DECLINE_REASON_CALLBACK
    assert view.view["private_metadata"] == token
    submitted = await world.submit_decline(REP, token, "wrong discount tier")
    assert submitted.status == 200 and submitted.ephemerals == []
    await world.deliver()
    stored = json.dumps(await runs.conversation(world.db, run.id))
    assert calls.DECLINED in stored and "wrong discount tier" in stored
    assert await world.crm.sent_count() == 0
    card = world.card(token)
    assert not has_buttons(card)
    assert "Declined by <@U0REP>: wrong discount tier" in json.dumps(card.blocks)
    assert (await runs.get(world.db, run.id)).state is not RunState.suspended


async def test_decline__form_that_slack_refuses_to_open_says_so(world: BotWorld) -> None:
    run = await world.asked()
    world.fake.fail_next("views.open", error="expired_trigger_id")
    reply = await world.click(REP, ids.DECLINE_ACTION, run.pending_token or "")
    assert "did not open the decline form" in reply.text
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def test_decline__submission_after_approval_gets_an_ephemeral(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    await world.click(REP, ids.APPROVE_ACTION, token)
    late = await world.submit_decline(REP, token, None)
    assert "already approved by <@U0REP>" in late.text
    assert late.ephemerals[0].channel == APPROVALS
    assert await world.crm.sent_count() == 1


async def test_approve__changed_details_post_a_diff_card_in_the_thread(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    await world.crm.set_tier("Henderson", "silver")
    await world.click(REP, ids.APPROVE_ACTION, token)
    await world.deliver()
    old = world.card(token)
    assert not has_buttons(old) and "Details changed while waiting" in json.dumps(old.blocks)
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.suspended and after.pending_token != token
    new = world.card(after.pending_token or "")
    assert has_buttons(new) and new.thread_ts == old.ts
    diff = json.dumps(new.blocks)
    assert "Discount tier" in diff and "gold" in diff and "silver" in diff
    assert await world.crm.sent_count() == 0
    await world.click(REP, ids.APPROVE_ACTION, after.pending_token or "")
    assert await world.crm.sent_count() == 1


async def test_approve__credit_hold_blocks_the_send_and_the_card_says_so(
    world: BotWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    await world.crm.set_credit_hold("Henderson", True)
    await world.click(REP, ids.APPROVE_ACTION, token)
    await world.deliver()
    card = json.dumps(world.card(token).blocks)
    assert "Blocked by a check" in card and "credit hold" in card
    assert await world.crm.sent_count() == 0


class HeldModel:
    """The quotes agent, whose next ``held`` calls wait until the test releases them."""

    def __init__(self) -> None:
        self.inner = quotes.scripted_model()
        self.held = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        if self.held > 0:
            self.held -= 1
            self.waiting.set()
            await self.release.wait()
            self.release.clear()
        return await self.inner.complete(messages, tools)


async def _answered_while_held(world: BotWorld, model: HeldModel, body: str) -> int:
    """POST ``body``; its response must come back while the model call is still held."""
    model.held, model.waiting = 1, asyncio.Event()
    # A response that waited for the model would never come: the model waits for us.
    status, _ = await asyncio.wait_for(world.post(body), timeout=30)
    await asyncio.wait_for(model.waiting.wait(), timeout=30)  # the slow work did start
    model.release.set()
    return status


async def test_ack__responses_go_out_before_the_slow_model_and_tool_work(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'slow.db'}", model=model) as world:
        response_url = world.fake.response_url(COMMAND_CHANNEL, user=REP)
        assert await _answered_while_held(world, model, signing.slash_command_body(
            REP, f"ask {ASK}", COMMAND_CHANNEL, response_url, signing.new_trigger_id())) == 200
        await world.settle()
        [run] = await runs.list_runs(world.db, limit=1)
        assert run.state is RunState.suspended
        await world.deliver()
        # The model step after the approved send is held this time.
        assert await _answered_while_held(
            world, model, world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or "")
        ) == 200
        await world.settle()
        assert (await runs.get(world.db, run.id)).state is RunState.answered
        assert await world.crm.sent_count() == 1


async def test_health__healthz_and_readyz(world: BotWorld) -> None:
    assert (await world.get(ids.HEALTH_PATH))[0] == 200
    status, body = await world.get(ids.READY_PATH)
    assert status == 200 and body["database"] == "reachable"


async def test_health__readyz_is_503_when_the_database_is_unreachable(
    world: BotWorld, tmp_path: Path
) -> None:
    reachable = world.services.rt.db
    # A refused TCP connection: aiosqlite's thread for a failed connect could outlive the loop.
    world.services.rt.db = engine.connect("postgresql+asyncpg://postgres@127.0.0.1:1/signoff")
    try:
        status, body = await world.get(ids.READY_PATH)
    finally:
        await world.services.rt.db.dispose()
        world.services.rt.db = reachable
    assert status == 503 and body["database"] == "unreachable"
    assert (await world.get(ids.HEALTH_PATH))[0] == 200


@pytest.mark.postgres
async def test_approve__full_flow_and_race_on_postgres(postgres_url: str) -> None:
    from tests.conftest import _truncate

    db = engine.connect(postgres_url)
    try:
        await _truncate(db)
    finally:
        await db.dispose()
    async with bot_world(postgres_url) as world:
        run = await world.asked()
        token = run.pending_token or ""
        bodies = [world.click_body(u, ids.APPROVE_ACTION, token) for u in (REP, REP, REP)]
        results = await asyncio.gather(*(world.post(b) for b in bodies))
        await world.settle()
        await world.deliver()
        assert [s for s, _ in results] == [200, 200, 200]
        assert await world.crm.sent_count() == 1
        assert len([e for e in world.fake.ephemerals(REP) if e.channel == APPROVALS]) == 2
        assert "Approved by" in json.dumps(world.card(token).blocks)
        assert (await runs.get(world.db, run.id)).state is RunState.answered


# --- `signoff serve` as a process ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(env: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL"))}
    return {**clean, "SIGNOFF_HOST": "127.0.0.1", **env}


def _serve(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "serve", "--port", str(_free_port())],
                          env=_env(env), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)


async def _get(url: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status


async def test_serve__migrates_sqlite_serves_health_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port = _free_port()
    env = _env({"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s" * 32,
                "SLACK_API_URL": "http://127.0.0.1:9/api/",
                "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"})
    proc = subprocess.Popen([sys.executable, "-m", "bot", "serve", "--port", str(port)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        ready, deadline = 0, time.monotonic() + 60
        while not ready and proc.poll() is None and time.monotonic() < deadline:
            try:
                ready = await _get(f"http://127.0.0.1:{port}{ids.READY_PATH}")
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
        assert ready == 200, proc.poll()
        assert await _get(f"http://127.0.0.1:{port}{ids.HEALTH_PATH}") == 200
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    db = engine.connect(f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert await migrate.current(db) == migrate.head()
    finally:
        await db.dispose()


def test_serve__refuses_to_start_without_a_bot_token(tmp_path: Path) -> None:
    done = _serve({"SLACK_SIGNING_SECRET": "s" * 32}, tmp_path)
    assert done.returncode == 2
    assert "SLACK_BOT_TOKEN is not set" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.postgres
def test_serve__refuses_a_postgres_database_not_at_head(
    postgres_server: object, tmp_path: Path
) -> None:
    from tests.conftest import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    url = postgres_server.create_database()

    async def _behind() -> None:
        db = engine.connect(url)
        try:
            await migrate.upgrade(db)
            await migrate.downgrade(db, "base")
        finally:
            await db.dispose()

    asyncio.run(_behind())
    done = _serve({"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s" * 32,
                   "DATABASE_URL": url}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "run `signoff db upgrade`" in done.stderr and "Traceback" not in done.stderr
