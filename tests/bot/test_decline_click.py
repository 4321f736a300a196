"""The Decline button refuses at the click when the clicker could not decide, and opens no form.

Over signed HTTP into the real Bolt app, against the Slack stand-in, on both
dialects. A refusal at the click is worded exactly as the same click on
Approve would be; the reason form opens only for someone who could decide.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from bot import ids
from bot.sandbox import signing
from resume import expire
from store import runs
from store.reasons import HaltReason
from store.states import RunState
from tests.bot.harness import APPROVALS, OTHER, REP, BotWorld, Reply, has_buttons


def _opened(world: BotWorld) -> list[Any]:
    """Every views.open the bot asked for, failed ones included."""
    return world.fake.calls("views.open")


async def test_decline__non_approver_gets_the_refusal_and_no_form(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    card = world.card(token)
    updates = len(world.fake.calls("chat.update"))

    reply = await world.click(OTHER, ids.DECLINE_ACTION, token)
    await world.deliver()

    assert reply.status == 200
    assert _opened(world) == [] and world.fake.views == []
    assert "only <@U0REP> can" in reply.text and "Nothing changed" in reply.text
    [told] = reply.ephemerals
    assert told.channel == APPROVALS and told.user == OTHER
    same = await world.click(OTHER, ids.APPROVE_ACTION, token)
    assert reply.text == same.text  # worded as the same click on Approve
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.suspended and after.pending_token == token
    assert (await world.approval(token)).decided_by is None
    now = world.card(token)
    assert (now.ts, now.text, now.blocks) == (card.ts, card.text, card.blocks)
    assert has_buttons(now) and len(world.fake.calls("chat.update")) == updates
    assert [e for e in world.fake.ephemerals(REP) if e.channel == APPROVALS] == []
    assert await world.crm.sent_count() == 0


async def test_decline__only_an_approver_gets_the_reason_form(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""

    refused = await world.click(OTHER, ids.DECLINE_ACTION, token)
    body = world.click_body(REP, ids.DECLINE_ACTION, token)
    trigger = json.loads(parse_qs(body)["payload"][0])["trigger_id"]
    before = {e.ts for e in world.fake.ephemerals(REP)}
    status, _ = await world.post(body)
    await world.settle()

    assert "only <@U0REP> can" in refused.text
    assert status == 200
    assert [e for e in world.fake.ephemerals(REP) if e.ts not in before] == []
    [view] = world.fake.views
    assert view.trigger_id == trigger
    assert view.view["callback_id"] == ids.DECLINE_REASON_CALLBACK
    assert view.view["private_metadata"] == token
    assert len(_opened(world)) == 1
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def test_decline__after_approval_tells_the_clicker_and_opens_nothing(
    world: BotWorld,
) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    await world.click(REP, ids.APPROVE_ACTION, token)
    await world.deliver()
    card = world.card(token)
    assert not has_buttons(card)

    late = await world.click(REP, ids.DECLINE_ACTION, token)
    await world.deliver()

    assert late.status == 200
    assert "already approved by <@U0REP>" in late.text
    assert _opened(world) == [] and world.fake.views == []
    again = await world.click(REP, ids.APPROVE_ACTION, token)
    assert late.text == again.text
    assert world.card(token).blocks == card.blocks
    decided = await world.approval(token)
    assert (decided.decision, decided.decided_by) == ("approve", REP)
    assert await world.crm.sent_count() == 1


async def test_decline__expired_request_says_so_and_opens_nothing(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    assert run.expires_at is not None
    await expire.expire_suspended(world.services.rt, now=run.expires_at + timedelta(seconds=1))
    await world.deliver()

    late = await world.click(REP, ids.DECLINE_ACTION, token)

    assert "This request expired" in late.text
    assert _opened(world) == [] and world.fake.views == []
    same = await world.click(REP, ids.APPROVE_ACTION, token)
    assert late.text == same.text
    after = await runs.get(world.db, run.id)
    assert after.state is RunState.halted and after.halt_reason == HaltReason.suspension_expired


async def test_decline__past_expiry_before_the_sweep_says_expired(world: BotWorld) -> None:
    run = await world.asked()
    token = run.pending_token or ""
    assert run.expires_at is not None
    past = run.expires_at + timedelta(seconds=1)
    world.services.rt.clock = lambda: past

    late = await world.click(REP, ids.DECLINE_ACTION, token)

    assert "This request expired" in late.text
    assert _opened(world) == []
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def test_decline__unknown_token_says_so_and_opens_nothing(world: BotWorld) -> None:
    run = await world.asked()
    card = world.card(run.pending_token or "")
    unknown = "not-a-token-" + "x" * 20

    replies = [await _click_unknown(world, action, unknown, card.channel, card.ts)
               for action in (ids.DECLINE_ACTION, ids.APPROVE_ACTION)]

    assert "not open any more" in replies[0].text
    assert replies[0].text == replies[1].text
    assert _opened(world) == []
    assert (await runs.get(world.db, run.id)).state is RunState.suspended


async def _click_unknown(world: BotWorld, action: str, token: str, channel: str,
                         ts: str) -> Reply:
    response_url = world.fake.response_url(channel, message_ts=ts, user=REP)
    body = signing.block_actions_body(REP, action, token, channel, ts, response_url,
                                      signing.new_trigger_id())
    before = {e.ts for e in world.fake.ephemerals(REP)}
    status, text = await world.post(body)
    await world.settle()
    return Reply(status, text, [e for e in world.fake.ephemerals(REP) if e.ts not in before])
