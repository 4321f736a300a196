"""The door in front of Bolt: replays, Slack's retries and requests the bot does not handle.

The same signed bytes sent twice within the signature window are one request:
the second is refused with a 409 and changes nothing, on the replica that saw
the first or on another one sharing its database (two servers on one SQLite
file, and on one PostgreSQL database). A delivery marked as Slack's retry gets
an empty 200 and does nothing. Signed bodies the bot has no listener for, or
nested past what a parser survives, are a 400 that changes nothing.
"""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest

from bot import ids, intake
from bot.sandbox import signing
from resume import expire
from store import events, runs
from store.events import EventKind
from store.records import Run
from store.states import RunState
from tests.bot.harness import ASK, COMMAND_CHANNEL, REP, SECRET, BotWorld, bot_world

Signed = tuple[bytes, dict[str, str]]


def _signed(body: str) -> Signed:
    return body.encode(), signing.signed_headers(SECRET, body)


def _command(world: BotWorld, text: str) -> Signed:
    url = world.fake.response_url(COMMAND_CHANNEL, user=REP)
    return _signed(signing.slash_command_body(REP, text, COMMAND_CHANNEL, url,
                                              signing.new_trigger_id()))


async def _send(world: BotWorld, signed: Signed, **extra: str) -> tuple[int, str]:
    body, headers = signed
    async with world.http.post(world.url + ids.EVENTS_PATH, data=body,
                               headers=headers | extra) as response:
        status, text = response.status, await response.text()
    await world.settle()
    return status, text


async def _runs(world: BotWorld) -> list[Run]:
    return await runs.list_runs(world.db, user_id=REP, limit=10)


async def _halted(world: BotWorld) -> Run:
    status, _ = await _send(world, _command(world, f"ask {ASK}"))
    assert status == 200
    [run] = await _runs(world)
    return await _expire(world, run)


async def _expire(world: BotWorld, run: Run) -> Run:
    run = await runs.get(world.db, run.id)
    assert run.state is RunState.suspended and run.expires_at is not None
    await expire.expire_suspended(world.services.rt, now=run.expires_at + timedelta(seconds=1))
    run = await runs.get(world.db, run.id)
    assert run.state is RunState.halted
    return run


# --- replays -----------------------------------------------------------------------------


async def test_replay__the_same_ask_twice_starts_one_run(world: BotWorld) -> None:
    ask = _command(world, f"ask {ASK}")

    first = await _send(world, ask)
    again = await _send(world, ask)

    assert first[0] == 200
    assert again == (409, json.dumps({"error": "request already seen"}))
    assert len(await _runs(world)) == 1


async def test_replay__the_same_continue_twice_grants_budget_once(world: BotWorld) -> None:
    """The replay comes after the continued run halted again: today it granted again."""
    run = await _halted(world)
    steps = run.limits["max_steps"]
    continued = _command(world, f"continue {run.id}")

    assert (await _send(world, continued))[0] == 200
    halted_again = await _expire(world, run)
    replayed = await _send(world, continued)

    assert replayed[0] == 409
    grants = await events.for_run(world.db, run.id, kind=EventKind.grant)
    assert len(grants) == 1
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.halted and after.limits == halted_again.limits
    assert after.limits["max_steps"] == steps + 4


async def test_replay__a_replayed_click_decides_nothing_more(
    world: BotWorld,
) -> None:
    assert (await _send(world, _command(world, f"ask {ASK}")))[0] == 200
    [run] = await _runs(world)
    await world.deliver()
    click = _signed(world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or ""))

    assert (await _send(world, click))[0] == 200
    # Not kept at the door (the token is single-use): the replay reaches Bolt and is refused.
    assert (await _send(world, click))[0] == 200

    assert await world.crm.sent_count() == 1
    assert len(await events.for_run(world.db, run.id, kind="decision")) == 1
    assert (await runs.get(world.db, run.id)).state is RunState.answered


async def test_replay__sent_to_another_replica_is_refused_there_too(
    world: BotWorld, database_url: str
) -> None:
    ask = _command(world, f"ask {ASK}")
    async with bot_world(database_url) as other:
        assert (await _send(world, ask))[0] == 200
        assert (await _send(other, ask))[0] == 409
        assert len(await _runs(other)) == 1


async def test_replay__slack_retry_gets_an_empty_200_and_does_nothing(world: BotWorld) -> None:
    retried = await _send(world, _command(world, f"ask {ASK}"),
                          **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})

    assert retried == (200, "")
    assert await _runs(world) == []


async def test_replay__an_unsigned_retry_is_still_401(world: BotWorld) -> None:
    body, _ = _command(world, f"ask {ASK}")
    status, _ = await _send(world, (body, {"Content-Type": "application/x-www-form-urlencoded"}),
                            **{"X-Slack-Retry-Num": "1"})
    assert status == 401


# --- what the bot does not handle ------------------------------------------------------------


def _payload(payload: object) -> str:
    return urlencode({"payload": json.dumps(payload)})


def _deep(levels: int) -> str:
    return '{"type":"block_actions","x":' + "[" * levels + "]" * levels + "}"


UNHANDLED = {
    "nested-5000-json": _deep(5000),
    "nested-5000-form": urlencode({"payload": _deep(5000)}),
    "nested-past-the-limit": _deep(intake.MAX_DEPTH + 1),
    "interactive-message-without-actions": _payload(
        {"type": "interactive_message", "callback_id": "x"}),
    "workflow-step-edit-without-step": _payload(
        {"type": "workflow_step_edit", "callback_id": "x"}),
    "shortcut": _payload({"type": "shortcut", "callback_id": "x", "user": {"id": REP},
                          "trigger_id": "t"}),
    "event-callback": json.dumps({"type": "event_callback", "event": {"type": "app_mention"}}),
    "url-verification": json.dumps({"type": "url_verification", "challenge": "c"}),
    "no-type": _payload({"user": {"id": REP}}),
    "other-command": urlencode({"command": "/other", "user_id": REP, "text": f"ask {ASK}",
                                "response_url": "http://127.0.0.1:9/r"}),
}


@pytest.mark.parametrize("body", UNHANDLED.values(), ids=UNHANDLED.keys())
async def test_unhandled__signed_but_not_handled_is_400_and_changes_nothing(
    world: BotWorld, body: str
) -> None:
    status, text = await _send(world, _signed(body))

    assert (status, json.loads(text)) == (400, {"error": "malformed request"})
    assert await _runs(world) == [] and world.fake.messages() == []


async def test_unhandled__a_button_signoff_never_drew_is_400(world: BotWorld) -> None:
    await _send(world, _command(world, f"ask {ASK}"))
    [run] = await _runs(world)
    await world.deliver()
    body = world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or "")
    other = body.replace(ids.APPROVE_ACTION, "someone.elses_button")

    assert (await _send(world, _signed(other)))[0] == 400
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


def test_payloads__nesting_just_inside_the_limit_is_judged_on_its_shape() -> None:
    # Depth alone never refuses a payload within the limit: this one fails on its actions.
    inside = _deep(intake.MAX_DEPTH - 2).encode()
    assert intake.problem(inside, "application/json") == "no actions"
    past = _deep(intake.MAX_DEPTH).encode()
    assert intake.problem(past, "application/json") == f"nested deeper than {intake.MAX_DEPTH}"
