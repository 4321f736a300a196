"""Requests naming another workspace (team, a guest's own team, an enterprise) change nothing.

The stand-in answers ``auth.test`` for the bot token with team ``T0SANDBOX`` and
no enterprise. A click, a decline submission or a slash command that names any
other team or an enterprise, correctly signed, is refused with a 403, logged,
and leaves the run, the card and the CRM as they were; the same request from
the bot's own workspace goes through (the control).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from prometheus_client import REGISTRY

from bot import ids, services
from bot.sandbox import signing
from store import runs
from store.states import RunState
from tests.bot.harness import ASK, REP, BotWorld, has_buttons

FOREIGN = "T0ELSEWHERE"


def _click(world: BotWorld, token: str, change: dict[str, Any]) -> str:
    payload = json.loads(dict(parse_qsl(world.click_body(REP, ids.APPROVE_ACTION, token)))
                         ["payload"])
    for path, value in change.items():
        where, _, key = path.rpartition(".")
        (payload[where] if where else payload)[key] = value
    return signing.form_body(payload)


CLICKS = {
    "other-team": {"team.id": FOREIGN},
    "slack-connect-guest": {"user.team_id": FOREIGN},
    "enterprise": {"enterprise": {"id": "E0OTHERORG", "name": "Other Org"}},
}


@pytest.mark.parametrize("change", CLICKS.values(), ids=CLICKS.keys())
async def test_click__from_another_workspace_is_refused_and_changes_nothing(
    world: BotWorld, change: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    told = len(world.fake.ephemerals(REP))
    acks = REGISTRY.get_sample_value("signoff_click_ack_seconds_count", {"transport": "http"})

    with caplog.at_level(logging.WARNING, logger="bot.services"):
        status, text = await world.post(_click(world, token, change))
        await world.settle()
    await world.deliver()

    assert (status, text) == (services.FOREIGN_STATUS, services.FOREIGN_BODY)
    assert [r for r in caplog.records if getattr(r, "action", None) == "foreign_workspace"]
    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert has_buttons(world.card(token)) and len(world.fake.ephemerals(REP)) == told
    assert REGISTRY.get_sample_value(  # refused, so not an ack time
        "signoff_click_ack_seconds_count", {"transport": "http"}) == acks
    assert await world.crm.sent_count() == 0
    # The same click from the bot's own workspace approves: the refusal above was the team.
    status, _ = await world.post(_click(world, token, {}))
    await world.settle()
    assert status == 200 and await world.crm.sent_count() == 1


async def test_decline_submission__from_another_team_is_refused(world: BotWorld) -> None:
    run = await world.asked()
    values = {ids.DECLINE_REASON_BLOCK: {ids.DECLINE_REASON_ACTION: {
        "type": "plain_text_input", "value": "no"}}}
    payload = signing.view_submission_payload(REP, ids.DECLINE_REASON_CALLBACK,
                                              run.pending_token or "", values)
    payload["team"] = {"id": FOREIGN, "domain": "elsewhere"}

    status, _ = await world.post(signing.form_body(payload))
    await world.settle()

    assert status == services.FOREIGN_STATUS
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


@pytest.mark.parametrize("field", [{"team_id": FOREIGN}, {"enterprise_id": "E0OTHERORG"}],
                         ids=["team_id", "enterprise_id"])
async def test_command__from_another_workspace_starts_nothing(
    world: BotWorld, field: dict[str, str]
) -> None:
    fields = dict(parse_qsl(signing.slash_command_body(
        REP, f"ask {ASK}", "C0GENERAL", world.fake.response_url("C0GENERAL", user=REP),
        signing.new_trigger_id())))

    status, _ = await world.post(urlencode(fields | field))
    await world.settle()

    assert status == services.FOREIGN_STATUS
    assert await runs.list_runs(world.db, user_id=REP, limit=5) == []
    assert world.fake.messages() == [] and world.fake.ephemerals(REP) == []
