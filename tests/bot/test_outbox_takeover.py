"""A delivering process that dies strands nothing: its row is taken over by heartbeat,
and a card it had already posted is adopted, not posted twice, and never keeps live buttons.

Slack is the local stand-in behind the real slack_sdk client; the dead process is
written into the store as it leaves things (its row taken, its card in Slack).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from slack_sdk.web.async_client import AsyncWebClient

from bot import cards
from bot.outbox import adopt, relay
from bot.sandbox import fake_slack
from resume.outbox import ApprovalCard
from store import claims, outbox, runs
from store.engine import Database
from store.records import OutboxRow
from store.states import OutboxState
from tests import journeys
from tests.bot.harness import has_actions
from tests.quotes_harness import ASK, quotes_world

APPROVALS = "C0APPROVALS"
REP = "U0REP"
ORPHAN_AFTER = timedelta(seconds=30)
ALIVE = relay.Owner("proc_alive", ORPHAN_AFTER)


async def _card_row(db: Database, run_id: str) -> OutboxRow:
    [row] = [r for r in await outbox.for_run(db, run_id) if r.kind == "approval_card"]
    return row


async def _die_after_posting(db: Database, client: AsyncWebClient, run_id: str,
                             at: datetime) -> None:
    """What a process killed after Slack took the card, before its ts was stored, leaves."""
    [taken] = await outbox.pick_due(db, now=at, limit=1, lease=relay.LEASE,
                                    owner_id="proc_dead", stale_before=at - ORPHAN_AFTER)
    assert taken.kind == "approval_card"
    card = ApprovalCard.model_validate(taken.payload)
    text, blocks = cards.approval_card(card)
    await client.chat_postMessage(channel=APPROVALS, text=text, blocks=blocks,
                                  metadata=adopt.metadata(card))


async def test_a_dead_deliverers_card_is_taken_over_within_the_orphan_window_and_adopted(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    run = await journeys.start(world.rt, REP, ASK)
    t0 = datetime.now(UTC) + timedelta(seconds=1)
    await _die_after_posting(db, client, run.id, t0)
    [card] = fake.messages(APPROVALS)
    # The requester's approver clicks the live card: the run is answered meanwhile.
    await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve", REP)

    # The dead process's heartbeat is fresh enough: nobody touches its row yet.
    assert (await relay.deliver_due(db, client, now=t0 + ORPHAN_AFTER, owner=ALIVE)).picked == 0
    # One tick past the window (not the 5-minute lease) the row is taken over.
    report = await relay.deliver_due(db, client, now=t0 + ORPHAN_AFTER + timedelta(seconds=2),
                                     owner=ALIVE)

    assert report.sent == 3 and report.dead == 0  # the card, its update, the answer
    assert (await _card_row(db, run.id)).attempts == 2
    posted_cards = [m for m in fake.messages(APPROVALS) if m.thread_ts is None]
    assert [m.ts for m in posted_cards] == [card.ts]  # adopted, never posted twice
    assert not has_actions(card) and card.edits >= 1
    record = await claims.approval(db, run.pending_token or "")
    assert record is not None and (record.slack_channel, record.slack_ts) == (APPROVALS, card.ts)
    stored = await runs.get(db, run.id)
    assert stored.slack_ts == card.ts
    assert await outbox.counts(db) == {OutboxState.sent.value: 3}


async def test_a_card_retried_after_its_request_was_settled_lands_without_buttons(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    run = await journeys.start(world.rt, REP, ASK)
    fake.fail_next("chat.postMessage", error="channel_not_found")
    assert (await relay.deliver_due(db, client, owner=ALIVE,
                                    now=datetime.now(UTC) + timedelta(seconds=1))).dead == 1
    await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve", REP)
    await relay.deliver_due(db, client, owner=ALIVE, now=datetime.now(UTC) + timedelta(seconds=1))
    dead = await _card_row(db, run.id)
    assert dead.state is OutboxState.dead

    assert await outbox.retry_dead(db, dead.id, now=datetime.now(UTC)) is not None
    await relay.deliver_due(db, client, owner=ALIVE, now=datetime.now(UTC) + timedelta(seconds=1))

    top_level = [m for m in fake.messages(APPROVALS) if m.thread_ts is None]
    [late] = [m for m in top_level if "answered" not in m.text]
    assert not has_actions(late)
    assert (await _card_row(db, run.id)).state is OutboxState.sent
