"""Two different approvers click Approve on one card at the same moment.

The send_quote tool here names two approvers (``Approvers(users=(A, B))``),
so both clicks are allowed: exactly one wins, the quote is sent once, the card
names the winner, and the other approver is told who got there first.
Over signed HTTP into the real Bolt app, on both dialects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot import ids
from examples import quotes
from examples.crm import CRM
from resume.apps import App
from resume.model import Model
from resume.tools import Approvers, Tool
from store import runs
from store.states import RunState
from tests.bot.harness import APPROVALS, ASK, REP, BotWorld, bot_world, has_buttons

ALICE, BOB = "U0ALICE", "U0BOB"


def two_approvers(crm: CRM, model: Model | None) -> App:
    """The quotes app, with sending approved by Alice or Bob (not the requester)."""
    app = quotes.build(crm, model)
    tools: list[Tool[Any]] = [
        dataclasses.replace(t, approvers=Approvers(users=(ALICE, BOB)))
        if t.name == "send_quote" else t
        for t in app.tools
    ]
    return dataclasses.replace(app, tools=tools)


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[BotWorld]:
    async with bot_world(database_url, build_app=two_approvers) as w:
        yield w


@pytest.mark.parametrize("first", [ALICE, BOB])
async def test_approve__two_approvers_at_once_execute_once_and_the_loser_is_told(
    world: BotWorld, first: str
) -> None:
    asked = await world.command(REP, f"ask {ASK}")
    assert "Started run" in asked.text, asked.text
    [run] = await runs.list_runs(world.db, user_id=REP, limit=1)
    run = await runs.get(world.db, run.id)
    assert run.state is RunState.suspended, run.halt_reason
    await world.deliver()
    token = run.pending_token or ""
    card = world.card(token)
    assert card.channel == APPROVALS and has_buttons(card)
    assert ALICE in json.dumps(card.blocks) and BOB in json.dumps(card.blocks)

    clickers = [first, BOB if first == ALICE else ALICE]
    bodies = [world.click_body(user, ids.APPROVE_ACTION, token) for user in clickers]
    results = await asyncio.gather(*(world.post(b) for b in bodies))
    await world.settle()
    await world.deliver()

    assert [status for status, _ in results] == [200, 200]
    assert await world.crm.sent_count() == 1
    winner = (await world.approval(token)).decided_by
    assert winner in (ALICE, BOB)
    loser = BOB if winner == ALICE else ALICE
    told = [e for e in world.fake.ephemerals(loser) if e.channel == APPROVALS]
    assert len(told) == 1 and f"already approved by <@{winner}>" in told[0].text, told
    assert [e for e in world.fake.ephemerals(winner) if e.channel == APPROVALS] == []
    after = world.card(token)
    assert not has_buttons(after)
    assert f"Approved by <@{winner}>" in json.dumps(after.blocks)
    assert len([m for m in world.fake.messages() if "Approved by" in json.dumps(m.blocks)]) == 1
    assert (await runs.get(world.db, run.id)).state is RunState.answered


async def test_serve__warns_at_start_when_other_approvers_would_get_no_card(
    database_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="bot.server"):
        async with bot_world(database_url, build_app=two_approvers,
                             SIGNOFF_APPROVALS_CHANNEL=""):  # cards: DMs
            pass
    [warning] = [r for r in caplog.records
                 if getattr(r, "action", None) == "approvals_channel_missing"]
    assert "send_quote" in warning.getMessage()
    assert "SIGNOFF_APPROVALS_CHANNEL" in warning.getMessage()

    caplog.clear()
    with caplog.at_level("WARNING", logger="bot.server"):
        async with bot_world(database_url, build_app=two_approvers):  # a channel is set
            pass
    assert not [r for r in caplog.records
                if getattr(r, "action", None) == "approvals_channel_missing"]
