"""What the requester reads in Slack after a decline and a cancel, end to end.

Signed requests into the real Bolt app, the outbox delivered to the Slack
stand-in, on both dialects: the thread, the card and `/signoff status` say
what a person did, in their words, with mentions and no CLI advice.
"""

from __future__ import annotations

from bot import ids
from bot.cards import message
from store import runs
from store.states import RunState
from tests.bot.harness import REP, BotWorld


async def test_a_decline_reads_as_a_decline_in_the_thread_and_in_status(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    card = world.card(token)
    assert (await world.click(REP, ids.DECLINE_ACTION, token)).status == 200

    await world.submit_decline(REP, token, "wrong discount tier")
    await world.settle()
    await world.deliver()

    after = await runs.get(world.db, run.id)
    assert after.state in (RunState.failed, RunState.answered)
    [notice] = [m for m in world.thread(card) if "Declined" in m.text or "declined" in m.text]
    shown = "\n".join([notice.text, *message.texts(notice.blocks)])
    assert "Declined by <@U0REP>: wrong discount tier. Nothing was sent." in shown
    assert "signoff runs show" not in shown and "failed" not in shown
    status = await world.command(REP, f"status {run.id}")
    assert f"Run `{run.id}` was declined by <@U0REP>: wrong discount tier." in status.text
    model_saw = [m for m in await runs.conversation(world.db, run.id) if m.get("role") == "tool"]
    assert model_saw and not any(REP in str(m.get("content")) for m in model_saw)


async def test_a_cancel_says_by_whom_on_the_card_the_thread_and_status(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""

    reply = await world.command(REP, f"cancel {run.id}")
    await world.deliver()

    assert "Cancelled run" in reply.text
    card = world.card(token)
    assert "Cancelled by <@U0REP>" in str(card.blocks)
    [notice] = [m for m in world.thread(card) if "cancelled" in m.text]
    assert f"Run `{run.id}` was cancelled by <@U0REP>." in str(notice.blocks)
    assert "cancelled by U0REP" not in str(notice.blocks)
    status = await world.command(REP, f"status {run.id}")
    assert f"Run `{run.id}` was cancelled by <@U0REP>." in status.text


async def test_no_post_unfurls(world: BotWorld) -> None:
    run = await world.asked()
    await world.command(REP, f"cancel {run.id}")
    await world.deliver()

    posts = world.fake.calls("chat.postMessage")
    assert len(posts) >= 2
    assert all(p.body.get("unfurl_links") in (False, "false", "0") for p in posts)
    assert all(p.body.get("unfurl_media") in (False, "false", "0") for p in posts)
