"""Two real `signoff serve` processes in Socket Mode with JSON logs, on one PostgreSQL.

Each replica opens its own connection to the stand-in; the stand-in spreads envelopes over
them as Slack does. A whole run (ask -> card -> approve -> answered) goes through, and then
the whole of both processes' output is read: one JSON object per line, and not one token
or secret in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot import ids
from bot.sandbox import signing
from tests.acceptance import replicas
from tests.acceptance.replicas import Card, World, until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

APP_TOKEN = "xapp-1-A0SIGNOFF-77-appsecretvalue"
METRICS_TOKEN = "metrics-bearer-secret-value"
REQUESTER = "U0SOCKET"


def _lines(text: str) -> list[dict[str, Any]]:
    parsed = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)  # a line that is not JSON fails the test here
        assert isinstance(record, dict), line
        parsed.append(record)
    return parsed


async def test_serve__socket_mode_replicas_carry_a_run_and_log_json_without_secrets(
    replica_db: str, tmp_path: Path
) -> None:
    world = World(replica_db)
    async with replicas.cluster(replica_db, tmp_path) as c:
        socket = c.fake.socket_mode
        reps = await c.start(2, SLACK_APP_TOKEN=APP_TOKEN, SIGNOFF_LOG_FORMAT="json",
                             SIGNOFF_METRICS_TOKEN=METRICS_TOKEN)
        await until(lambda: _true(socket.open_connections == 2), timeout=30,
                    what="both replicas connected over Socket Mode")

        asked = await socket.deliver_form(signing.slash_command_body(
            REQUESTER, f"ask {replicas.question(0)}", replicas.COMMAND_CHANNEL,
            c.fake.response_url(replicas.COMMAND_CHANNEL, user=REQUESTER),
            signing.new_trigger_id()))
        assert asked["status"] == 200, asked
        await until(lambda: _true(bool(c.ephemerals_containing(REQUESTER, "Started run"))),
                    timeout=30, what="the requester told the run started")

        async def card() -> Card | None:
            cards = await world.open_cards()
            return cards[0] if cards else None

        opened = await until(card, timeout=60, what="the approval card in Slack")
        clicked = await socket.deliver_form(signing.block_actions_body(
            REQUESTER, ids.APPROVE_ACTION, opened.token, opened.channel, opened.ts,
            c.fake.response_url(opened.channel, message_ts=opened.ts, user=REQUESTER),
            signing.new_trigger_id()))
        assert clicked["status"] == 200, clicked

        async def answered() -> bool:
            run = (await world.runs())[opened.run_id]
            return run["state"] == "answered" and await world.outbox_settled()

        await until(answered, timeout=60, what="the run answered and every message sent")
        # The envelopes went to both replicas, one each, and each was acked once.
        assert sorted(a.type for a in socket.acks) == ["interactive", "slash_commands"]
        assert len(await world.sent_quotes()) == 1
        async with aiohttp.ClientSession() as http, http.get(
                reps[0].url + ids.METRICS_PATH,
                headers={"Authorization": f"Bearer {METRICS_TOKEN}"}) as scraped:
            assert scraped.status == 200
            assert 'signoff_runs{state="answered"} 1.0' in await scraped.text()
        tokens = [r["token"] for r in await world.fetch("SELECT token FROM approvals")]
        assert await c.stop_all() == {r.name: 0 for r in reps}

    output = "\n".join(r.log_path.read_text() for r in reps)
    records = _lines(output)
    assert records and all({"timestamp", "level", "logger", "message"} <= set(r)
                           for r in records)
    mine = [r for r in records if r.get("run_id") == opened.run_id]
    assert {"click_won"} <= {r.get("action") for r in mine}, mine
    assert any(r.get("user") == REQUESTER for r in mine)
    for secret in (replicas.TOKEN, replicas.SECRET, APP_TOKEN, METRICS_TOKEN, *tokens):
        assert secret not in output, f"the log holds a secret ({secret[:6]}...)"


async def _true(value: bool) -> bool:
    return value
