"""The outbox reaches Slack: cards, updates and notices, through 429s, 500s and dead letters.

Rows are made by the real quotes flow; Slack is the local stand-in, driven by
the real slack_sdk client (no retry handlers, so every failure reaches the
outbox). Time moves through ``now=``, never by sleeping.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbox import relay
from bot.sandbox import fake_slack
from store import claims, outbox, runs
from store.engine import Database
from store.records import OutboxRow, Run
from store.states import OutboxState
from tests import journeys
from tests.bot.harness import has_actions
from tests.quotes_harness import ASK, QuotesWorld, quotes_world

APPROVALS = "C0APPROVALS"
REP = "U0REP"


async def _suspended(db: Database, channel: str | None = APPROVALS) -> tuple[QuotesWorld, Run]:
    world = await quotes_world(db, approvals_channel=channel)
    run = await journeys.start(world.rt, REP, ASK)
    assert run.pending_token is not None
    return world, run


def _now() -> datetime:
    """Just after the rows were written (they are due at their creation time)."""
    return datetime.now(UTC) + timedelta(seconds=1)


async def _row(db: Database, run_id: str, kind: str) -> OutboxRow:
    [row] = [r for r in await outbox.for_run(db, run_id) if r.kind == kind]
    return row


async def test_deliver_due__card_then_update_then_answer_in_the_cards_thread(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world, run = await _suspended(db)

    report = await relay.deliver_due(db, client, now=_now())

    assert (report.sent, report.retried, report.dead) == (1, 0, 0)
    [card] = fake.messages(APPROVALS)
    assert has_actions(card) and (run.pending_token or "?") in json.dumps(card.blocks)
    record = await claims.approval(db, run.pending_token or "")
    assert record is not None and (record.slack_channel, record.slack_ts) == (APPROVALS, card.ts)
    stored = await runs.get(db, run.id)
    assert (stored.slack_channel, stored.slack_ts) == (APPROVALS, card.ts)

    await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve", REP)
    report = await relay.deliver_due(db, client, now=_now())

    assert report.sent == 2
    [card, answer] = fake.messages(APPROVALS)
    assert card.edits == 1 and not has_actions(card)
    assert "Approved" in card.text and REP in card.text
    assert answer.thread_ts == card.ts and "answered" in answer.text
    assert "send_quote" in json.dumps(answer.blocks)
    assert len(fake.calls("chat.postMessage")) == 2
    assert {r.state for r in await outbox.for_run(db, run.id)} == {OutboxState.sent}


async def test_deliver_due__card_without_a_channel_is_a_dm_to_the_requester(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    _, run = await _suspended(db, channel=None)

    await relay.deliver_due(db, client, now=_now())

    [card] = fake.messages(fake_slack.dm_channel(REP))
    assert (run.pending_token or "?") in json.dumps(card.blocks)
    assert (await runs.get(db, run.id)).slack_channel == fake_slack.dm_channel(REP)


async def test_deliver_due__429_waits_for_retry_after_then_posts_once(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    _, run = await _suspended(db)
    fake.fail_next("chat.postMessage", status=429, retry_after=7)
    now = _now()

    report = await relay.deliver_due(db, client, now=now)

    assert (report.retried, report.stopped_by) == (1, "429 ratelimited")
    row = await _row(db, run.id, "approval_card")
    assert row.state is OutboxState.pending and row.last_error == "429 ratelimited"
    assert row.next_attempt_at == now + timedelta(seconds=7)
    assert (await relay.deliver_due(db, client, now=now + timedelta(seconds=6))).picked == 0
    assert fake.messages() == []

    report = await relay.deliver_due(db, client, now=now + timedelta(seconds=7))

    assert report.sent == 1 and len(fake.messages(APPROVALS)) == 1
    row = await _row(db, run.id, "approval_card")
    assert row.state is OutboxState.sent and row.attempts == 2


async def test_deliver_due__burst_of_500s_backs_off_and_posts_once(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    _, run = await _suspended(db)
    fake.fail_next("chat.postMessage", status=500, count=4)
    now = _now()
    waits: list[timedelta] = []

    for _ in range(4):
        report = await relay.deliver_due(db, client, now=now)
        assert report.retried == 1 and report.stopped_by == "500 fatal_error"
        row = await _row(db, run.id, "approval_card")
        waits.append(row.next_attempt_at - now)
        assert (await relay.deliver_due(db, client, now=row.next_attempt_at
                                           - timedelta(milliseconds=1))).picked == 0
        now = row.next_attempt_at
    report = await relay.deliver_due(db, client, now=now)

    assert report.sent == 1 and len(fake.messages(APPROVALS)) == 1
    # Exponential with jitter: 2**n seconds, between half and all of it.
    for attempt, wait in enumerate(waits, start=1):
        assert 2**attempt / 2 <= wait.total_seconds() <= 2**attempt
    row = await _row(db, run.id, "approval_card")
    assert row.state is OutboxState.sent and row.attempts == 5


async def test_deliver_due__dead_letter_after_max_attempts_is_logged(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, run = await _suspended(db)
    fake.fail_next("chat.postMessage", status=503, count=100)
    now = _now()

    with caplog.at_level(logging.WARNING, logger="bot.outbox.attempt"):
        for _ in range(3):
            await relay.deliver_due(db, client, now=now, max_attempts=3)
            now += timedelta(minutes=10)

    row = await _row(db, run.id, "approval_card")
    assert row.state is OutboxState.dead and row.attempts == 3
    assert row.last_error is not None and "gave up after 3 attempts" in row.last_error
    dead = [r for r in caplog.records if getattr(r, "action", None) == "outbox_dead"]
    assert len(dead) == 1 and dead[0].levelno == logging.ERROR
    assert getattr(dead[0], "outbox_id", None) == row.id
    assert getattr(dead[0], "run_id", None) == run.id
    # Only the requester's DM about it is tried later (Slack still fails it), never the card.
    assert (await relay.deliver_due(db, client, now=now + timedelta(hours=1))).picked == 1
    assert (await _row(db, run.id, "approval_card")).attempts == 3
    assert (await _row(db, run.id, "dead_card_notice")).state is OutboxState.pending
    assert fake.messages() == []


async def test_deliver_due__channel_not_found_is_dead_at_once_and_its_update_skipped(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world, run = await _suspended(db)
    fake.fail_next("chat.postMessage", error="channel_not_found")

    report = await relay.deliver_due(db, client, now=_now())

    assert report.dead == 1 and report.stopped_by is None
    row = await _row(db, run.id, "approval_card")
    assert (row.state, row.attempts, row.last_error) == (OutboxState.dead, 1, "channel_not_found")

    await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve", REP)
    await relay.deliver_due(db, client, now=_now())

    # The card never existed, so there is nothing to update; the answer still goes out.
    assert fake.calls("chat.update") == []
    assert (await _row(db, run.id, "card_update")).state is OutboxState.sent
    [answer] = fake.messages(APPROVALS)
    assert "answered" in answer.text and answer.thread_ts is None


async def test_deliver_due__card_posted_before_a_crash_is_not_posted_again(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    _, run = await _suspended(db)
    # A previous attempt posted the card and recorded it, then died before marking the row sent.
    await claims.set_card_ref(db, run.pending_token or "", APPROVALS, "1700000000.000100")
    assert (await _row(db, run.id, "approval_card")).state is OutboxState.pending

    report = await relay.deliver_due(db, client, now=_now())

    assert report.sent == 1
    assert fake.calls("chat.postMessage") == []
    assert (await _row(db, run.id, "approval_card")).state is OutboxState.sent
    stored = await runs.get(db, run.id)
    assert (stored.slack_channel, stored.slack_ts) == (APPROVALS, "1700000000.000100")


async def test_relay__an_outage_loses_nothing(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    started = [await journeys.start(world.rt, REP, ASK) for _ in range(3)]
    await journeys.resume_after_confirmation(world.rt, started[0].pending_token or "",
                                                 "approve", REP)
    enqueued = sum([len(await outbox.for_run(db, r.id)) for r in started])
    assert enqueued == 3 + 2  # three cards; one update and one answer
    # Far more failures than any row may have: only Slack answering again ends it.
    fake.fail_next("*", status=500, count=30)
    fake.fail_next("*", status=429, retry_after=3, count=5)
    deliverer = relay.Relay(db, client, interval=None, max_attempts=3)
    now = _now()

    for _ in range(60):
        await deliverer.deliver(now=now)
        now += timedelta(minutes=6)  # past the longest backoff

    assert await outbox.counts(db) == {"sent": enqueued}
    messages = fake.messages(APPROVALS)
    assert len(messages) == 4  # three cards and one answer, each posted once
    assert sum(m.edits for m in messages) == 1
    assert len(fake.calls("auth.test")) > 30  # the outage was waited out by probing


async def test_relay__kick_delivers_without_waiting_for_the_interval(
    db: Database, fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    loop = relay.Relay(db, client, interval=None)  # kicks only
    loop.start()
    try:
        await asyncio.sleep(0.05)  # the first pass runs at start and finds nothing
        assert fake.messages() == []
        run = await journeys.start(world.rt, REP, ASK)
        loop.kick()
        for _ in range(200):
            if fake.messages(APPROVALS):
                break
            await asyncio.sleep(0.02)
        [card] = fake.messages(APPROVALS)
        assert (run.pending_token or "?") in json.dumps(card.blocks)
    finally:
        await loop.stop()
    assert not loop.running

