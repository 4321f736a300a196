"""A card Slack refuses for good is not silent: the requester is told by DM and
`/signoff status` says so. Real HTTP into the real Bolt app, Slack is the stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.sandbox import fake_slack
from store import outbox, runs
from store.states import OutboxState, RunState
from tests.bot.harness import APPROVALS, ASK, REP, BotWorld, bot_world


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[BotWorld]:
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}") as w:
        yield w


async def test_a_refused_card_is_told_to_the_requester_and_shown_by_status(
    world: BotWorld,
) -> None:
    world.fake.fail_next("chat.postMessage", error="channel_not_found")
    await world.command(REP, f"ask {ASK}")
    [run] = await runs.list_runs(world.db, user_id=REP, limit=1)

    await world.deliver()

    assert world.fake.messages(APPROVALS) == []
    [card_row] = [r for r in await outbox.for_run(world.db, run.id) if r.kind == "approval_card"]
    assert card_row.state is OutboxState.dead
    [dm] = world.fake.messages(fake_slack.dm_channel(REP))
    assert "could not be posted for approval" in dm.text
    assert "`channel_not_found`" in dm.text and "SIGNOFF_APPROVALS_CHANNEL" in dm.text
    assert "`send_quote`" in dm.text and run.id in dm.text
    assert not any(block["type"] == "actions" for block in dm.blocks)

    status = await world.command(REP, f"status {run.id}")

    assert (await runs.get(world.db, run.id)).state is RunState.suspended
    assert "could not be posted" in status.text and "`channel_not_found`" in status.text
    # Told once: a second pass posts nothing more.
    await world.deliver()
    assert len(world.fake.messages(fake_slack.dm_channel(REP))) == 1
