"""A database outage in the middle of a delivery: nothing posted twice, nothing left waiting.

The database goes through a TCP proxy; a statement hook cuts it exactly where
an outage hurts (see ``_cut_before``): after Slack has the message but before the
row says so, or after the row is leased but before anything was posted.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import event

from bot.outbox import relay
from bot.sandbox import fake_slack
from store import errors, outbox
from store.engine import Database
from store.records import Run
from store.states import OutboxState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world
from tests.tcp_proxy import Proxy

pytestmark = pytest.mark.postgres

APPROVALS = "C0APPROVALS"


def _cut_before(proxy: Proxy, db: Database, marker: str, *, for_seconds: float) -> list[str]:
    """Cut the proxy just before the first statement containing ``marker``; restore later."""
    fired: list[str] = []

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not fired and marker in statement:
            fired.append(statement)
            proxy.cut()
            asyncio.get_running_loop().call_later(for_seconds, proxy.restore)

    event.listen(db.engine.sync_engine, "before_cursor_execute", hook)
    return fired


async def _card_waiting(
    db: Database, fake: fake_slack.FakeSlack
) -> tuple[Run, AsyncWebClient]:
    """A quote run suspended with its card in the outbox; a client for the stand-in Slack."""
    world = await quotes_world(db, approvals_channel=APPROVALS)
    run = await journeys.start(world.rt, "U0REP", ASK)
    return run, AsyncWebClient(token="xoxb-test", base_url=fake.api_url, retry_handlers=[])


async def test_relay__a_sent_card_is_marked_sent_through_an_outage_not_posted_again(
    pg_outage: tuple[Proxy, Database, Database], fake: fake_slack.FakeSlack,
) -> None:
    proxy, through, direct = pg_outage
    run, client = await _card_waiting(through, fake)
    # Slack has the card (and the card ref is recorded); then the database goes.
    fired = _cut_before(proxy, through, "SET state=", for_seconds=1.0)
    now = datetime.now(UTC) + timedelta(seconds=1)

    report = await relay.deliver_due(through, client, now=now)

    assert fired and proxy.refused > 0  # the outage hit the "sent" mark
    assert report.sent == 1
    [row] = await outbox.for_run(direct, run.id)
    assert row.state is OutboxState.sent
    # A later pass, long after any lease, finds nothing to post again.
    await relay.deliver_due(through, client, now=now + timedelta(hours=1))
    assert len(fake.messages(APPROVALS)) == 1


async def test_relay__a_row_cut_off_before_posting_is_handed_back_not_left_leased(
    pg_outage: tuple[Proxy, Database, Database], fake: fake_slack.FakeSlack,
) -> None:
    proxy, through, direct = pg_outage
    run, client = await _card_waiting(through, fake)
    # The row is leased; reading the approval record (before any post) meets the outage.
    fired = _cut_before(proxy, through, "FROM approvals", for_seconds=0.5)
    now = datetime.now(UTC) + timedelta(seconds=1)

    with pytest.raises(errors.DatabaseUnavailable):
        await relay.deliver_due(through, client, now=now)
    assert fired and fake.messages(APPROVALS) == []

    # The next pass, seconds later (not after the five-minute lease), posts it.
    report = await relay.deliver_due(through, client, now=now + timedelta(seconds=2))

    assert report.sent == 1
    [row] = await outbox.for_run(direct, run.id)
    assert row.state is OutboxState.sent
    assert len(fake.messages(APPROVALS)) == 1
