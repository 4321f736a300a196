"""`/signoff` and each subcommand, through real HTTP into the real Bolt app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot import ids
from bot.listeners import commands
from resume import expire
from store import runs
from store.records import Run
from store.states import RunState
from tests.bot.harness import ASK, OTHER, REP, BotWorld, bot_world, has_buttons


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[BotWorld]:
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}") as w:
        yield w


async def _ask(world: BotWorld, user: str = REP) -> Run:
    reply = await world.command(user, f"ask {ASK}")
    [run] = await runs.list_runs(world.db, user_id=user, limit=1)
    assert run.id in reply.text
    await world.deliver()
    return await runs.get(world.db, run.id)


def test_parse__splits_the_subcommand_from_its_argument() -> None:
    assert commands.parse("  ASK  draft a quote ") == ("ask", "draft a quote")
    assert commands.parse("") == ("help", "")


@pytest.mark.parametrize("text", ["", "help", "HELP"])
async def test_help__lists_every_subcommand(world: BotWorld, text: str) -> None:
    reply = await world.command(REP, text)
    assert reply.status == 200
    for sub in ids.SUBCOMMANDS:
        assert f"/signoff {sub}" in reply.text


async def test_unknown_subcommand__says_so_and_shows_help(world: BotWorld) -> None:
    reply = await world.command(REP, "frobnicate run_1")
    assert "I don't know `frobnicate`" in reply.text and "/signoff ask" in reply.text


@pytest.mark.parametrize("sub", ["continue", "status", "cancel"])
async def test_missing_run_id__asks_which_run(world: BotWorld, sub: str) -> None:
    reply = await world.command(REP, sub)
    assert "Which run?" in reply.text and f"/signoff {sub} &lt;run-id&gt;" in reply.text


async def test_ask__without_a_question_explains_usage(world: BotWorld) -> None:
    reply = await world.command(REP, "ask   ")
    assert "What should I do?" in reply.text
    assert await runs.list_runs(world.db) == []


async def test_ask__too_long_a_question_is_refused(world: BotWorld) -> None:
    reply = await world.command(REP, "ask " + "x" * 4001)
    assert "4,001 characters; the limit is 4,000" in reply.text
    assert await runs.list_runs(world.db) == []


async def test_ask__starts_a_run_replies_with_its_id_and_posts_the_card(
    world: BotWorld,
) -> None:
    run = await _ask(world)
    assert run.user_id == REP and run.state is RunState.suspended
    assert has_buttons(world.card(run.pending_token or ""))


async def test_status__shows_where_the_run_stands(world: BotWorld) -> None:
    run = await _ask(world)
    reply = await world.command(REP, f"status {run.id}")
    assert f"`{run.id}` is waiting for approval `send_quote`" in reply.text
    assert "Henderson" in reply.text


async def test_status__someone_elses_run_reads_like_an_unknown_one(world: BotWorld) -> None:
    run = await _ask(world)
    theirs = await world.command(OTHER, f"status {run.id}")
    unknown = await world.command(OTHER, "status run_0000000000000000")
    assert theirs.text.replace(run.id, "ID") == unknown.text.replace("run_0000000000000000", "ID")
    assert "You have no run" in theirs.text and "Henderson" not in theirs.text


async def test_list__shows_only_the_callers_waiting_and_halted_runs(world: BotWorld) -> None:
    run = await _ask(world)
    mine = await world.command(REP, "list")
    assert run.id in mine.text and "waiting for approval" in mine.text
    theirs = await world.command(OTHER, "list")
    assert run.id not in theirs.text and "You have no runs" in theirs.text


async def test_cancel__fails_the_run_and_the_card_loses_its_buttons(world: BotWorld) -> None:
    run = await _ask(world)
    reply = await world.command(REP, f"cancel {run.id}")
    assert f"Cancelled run `{run.id}`" in reply.text
    await world.deliver()
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.failed and after.halt_reason == "cancelled"
    card = world.card(run.pending_token or "")
    assert not has_buttons(card) and "Cancelled by <@U0REP>" in json.dumps(card.blocks)
    again = await world.command(REP, f"cancel {run.id}")
    assert "cannot be cancelled: it is failed" in again.text


async def test_cancel__someone_elses_run_reads_like_an_unknown_one(world: BotWorld) -> None:
    run = await _ask(world)
    theirs = await world.command(OTHER, f"cancel {run.id}")
    unknown = await world.command(OTHER, "cancel run_0000000000000000")
    assert theirs.text.replace(run.id, "ID") == unknown.text.replace("run_0000000000000000", "ID")
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def test_continue__a_halted_run_gets_a_grant_and_asks_again(world: BotWorld) -> None:
    run = await _ask(world)
    assert run.expires_at is not None
    later = run.expires_at + timedelta(seconds=1)
    await expire.expire_suspended(world.services.rt, now=later)
    assert (await runs.get(world.db, run.id)).state is RunState.halted
    listed = await world.command(REP, "list")
    assert run.id in listed.text and "halted" in listed.text
    reply = await world.command(REP, f"continue {run.id}")
    assert f"Continuing run `{run.id}`" in reply.text and "New limits: 12 steps" in reply.text
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.suspended and after.pending_token != run.pending_token
    await world.deliver(now=later)
    assert not has_buttons(world.card(run.pending_token or ""))
    assert has_buttons(world.card(after.pending_token or ""))


async def test_continue__a_run_that_is_not_halted_is_refused(world: BotWorld) -> None:
    run = await _ask(world)
    reply = await world.command(REP, f"continue {run.id}")
    assert "cannot be continued: it is suspended" in reply.text
    assert (await runs.get(world.db, run.id)).pending_token == run.pending_token


async def test_continue__someone_elses_run_reads_like_an_unknown_one(world: BotWorld) -> None:
    run = await _ask(world)
    theirs = await world.command(OTHER, f"continue {run.id}")
    unknown = await world.command(OTHER, "continue run_0000000000000000")
    assert theirs.text.replace(run.id, "ID") == unknown.text.replace("run_0000000000000000", "ID")
