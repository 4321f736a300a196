"""Socket Mode end to end: the real Bolt handler (AsyncSocketModeHandler, aiohttp) over a real
WebSocket to the stand-in, on both dialects. Commands, clicks and the decline form travel as
envelopes; the connection is dropped, refreshed and cut mid-click."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest
from prometheus_client import REGISTRY

from bot import ids, server
from store import runs
from store.records import Run
from store.states import RunState
from tests.bot.harness import APPROVALS, REP, Reply, has_buttons
from tests.bot.socket_harness import SocketWorld, socket_world


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[SocketWorld]:
    async with socket_world(database_url) as w:
        yield w


async def _answered(world: SocketWorld, run: Run) -> None:
    await world.settle()
    await world.deliver()
    assert (await runs.get(world.db, run.id)).state is RunState.answered
    assert await world.crm.sent_count() == 1


async def _approve_as_the_socket_drops(
    world: SocketWorld, *, after_ack: bool
) -> tuple[Reply, Reply]:
    """Approve a new card while the connection drops right after (or before) the ack; the
    SDK reconnects on its own and the run is answered. A second click, over the new
    connection, changes nothing and says who won. (the click's reply, the second's)"""
    run = await world.asked()
    token = run.pending_token or ""
    first = world.socket.connections
    if after_ack:
        world.socket.drop_after_ack = 1
    else:
        world.socket.drop_before_ack = 1

    reply = await world.click(REP, ids.APPROVE_ACTION, token)

    await world.socket.connected(more_than=first)
    await _answered(world, run)
    again = await world.click(REP, ids.APPROVE_ACTION, token)
    assert "already approved by <@U0REP>" in again.text
    assert await world.crm.sent_count() == 1
    return reply, again


async def test_socket_mode__ask_approve_answer_over_envelopes(world: SocketWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    card = world.card(token)
    assert card.channel == APPROVALS and has_buttons(card)

    reply = await world.click(REP, ids.APPROVE_ACTION, token)

    assert reply.status == 200 and reply.ephemerals == []
    await _answered(world, run)
    assert "Approved by <@U0REP>" in json.dumps(world.card(token).blocks)
    # Every envelope was acked once, on time, and none by a bot that had given up.
    assert [a.type for a in world.socket.acks] == ["slash_commands", "interactive"]
    assert not any(a.late for a in world.socket.acks)
    # HTTP still serves the checks, and says how Slack reaches this process.
    assert await world.get(ids.READY_PATH) == (
        200, {"ok": True, "database": "reachable", "socket_mode": "connected"})


async def test_socket_mode__decline_form_opens_and_its_submission_decides(
    world: SocketWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""

    await world.click(REP, ids.DECLINE_ACTION, token)
    assert [v.view.get("callback_id") for v in world.fake.views] == [ids.DECLINE_REASON_CALLBACK]
    reply = await world.submit_decline(REP, token, "wrong customer")

    assert reply.status == 200
    await world.settle()
    await world.deliver()
    assert await world.crm.sent_count() == 0
    assert "Declined by <@U0REP>" in json.dumps(world.card(token).blocks)


async def test_socket_mode__socket_dropped_right_after_the_ack_still_carries_the_click_out(
    world: SocketWorld,
) -> None:
    reply, again = await _approve_as_the_socket_drops(world, after_ack=True)

    assert reply.status == 200  # acked, then the connection went
    assert again.status == 200


async def test_socket_mode__connection_cut_before_the_ack_does_the_click_once(
    world: SocketWorld,
) -> None:
    reply, _ = await _approve_as_the_socket_drops(world, after_ack=False)

    # Slack never got the ack: the person is shown an error, but the envelope had reached
    # the bot, which carried the click out, once.
    assert reply.status == 503 and "before the ack" in reply.body


async def test_socket_mode__click_while_no_socket_is_open_is_lost_visibly_and_a_reclick_works(
    world: SocketWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    first = world.socket.connections
    world.socket.accepting = False
    await world.socket.drop()

    lost = await world.click(REP, ids.APPROVE_ACTION, token)

    assert lost.status == 503 and "no Socket Mode connection" in lost.body
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert has_buttons(world.card(token)) and await world.crm.sent_count() == 0
    assert (await world.get(ids.READY_PATH))[1]["socket_mode"] == "reconnecting"

    world.socket.accepting = True
    await world.socket.connected(more_than=first)
    reclick = await world.click(REP, ids.APPROVE_ACTION, token)

    assert reclick.status == 200
    await _answered(world, run)


async def test_socket_mode__slacks_disconnect_message_moves_the_bot_to_a_new_connection(
    world: SocketWorld,
) -> None:
    run = await world.asked()
    first = world.socket.connections

    await world.socket.disconnect("refresh_requested")
    await world.socket.connected(more_than=first)

    assert len(world.fake.calls("apps.connections.open")) == 2
    reply = await world.click(REP, ids.APPROVE_ACTION, run.pending_token or "")
    assert reply.status == 200
    await _answered(world, run)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve__app_token_nobody_accepts_stops_at_start_with_one_line(tmp_path: Path) -> None:
    closed, port = _free_port(), _free_port()  # nothing listens on `closed`
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLACK_", "SIGNOFF_", "DATABASE_URL"))}
    env.update({"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s" * 32,
                "SLACK_APP_TOKEN": "xapp-1-never-accepted", "SIGNOFF_HOST": "127.0.0.1",
                "SLACK_API_URL": f"http://127.0.0.1:{closed}/api/",
                "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"})

    done = subprocess.run([sys.executable, "-m", "bot", "serve", "--port", str(port)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert "apps.connections.open could not be reached" in line
    assert "Traceback" not in done.stderr and "never-accepted" not in done.stderr


async def test_open_socket_mode__a_refused_app_token_is_not_ready(database_url: str) -> None:
    async with socket_world(database_url) as world:
        world.socket.accepting = False
        assert world.web_app is not None
        with pytest.raises(server.NotReady, match="refused SLACK_APP_TOKEN: service_unavailable"):
            await server.open_socket_mode(world.web_app, world.services.settings)


async def test_socket_mode__a_click_from_another_workspace_is_never_acked_and_changes_nothing(
    world: SocketWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    fields = dict(parse_qsl(world.click_body(REP, ids.APPROVE_ACTION, token)))
    payload = json.loads(fields["payload"])
    payload["team"]["id"] = payload["user"]["team_id"] = "T0ELSEWHERE"
    acks = REGISTRY.get_sample_value("signoff_click_ack_seconds_count",
                                     {"transport": "socket_mode"})

    reply = await world.socket.deliver_form(urlencode({"payload": json.dumps(payload)}))
    await world.settle()

    # The workspace check is a Bolt middleware: it holds on the socket as over HTTP.
    assert reply["status"] == 503 and "no ack" in json.dumps(reply)
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert has_buttons(world.card(token)) and await world.crm.sent_count() == 0
    assert REGISTRY.get_sample_value(  # never acked, so not an ack time
        "signoff_click_ack_seconds_count", {"transport": "socket_mode"}) == acks
