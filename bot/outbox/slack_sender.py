"""Sending one outbox row to Slack: where it goes, what it looks like, what is remembered.

Each ``send_*`` function renders a payload from ``resume.outbox`` with
``bot.cards``, makes the Slack call(s), records where an approval card
landed, and returns. It does not mark the row: ``bot.outbox.attempt`` does
that (and decides what a failure means). A Slack error propagates as raised by
the client; ``Wait`` and ``Undeliverable`` are this module's own verdicts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from slack_sdk.web.async_client import AsyncWebClient

from bot import cards
from bot.cards import undelivered
from bot.outbox import adopt
from resume.outbox import ApprovalCard, CardUpdate, RunNotice
from store import claims, errors, outage, outbox, runs
from store.engine import Database
from store.records import OutboxRow
from store.states import OutboxState

log = logging.getLogger(__name__)

#: How long a card update waits for its card to be posted before looking again.
CARD_WAIT_SECONDS = 5.0
#: How long a posted card's channel/ts is held in memory, retrying the write, while the
#: database is away (a restart, a failover): the record is what stops a second post.
REMEMBER_FOR_SECONDS = 60.0


class Undeliverable(Exception):
    """The row can never be delivered as it stands (bad payload, record gone); it dies."""


class PostedUnrecorded(errors.DatabaseUnavailable):
    """Posted to Slack, but the database never heard: the row is not handed back at
    once, and its next attempt adopts the card it finds in Slack (``bot.outbox.adopt``)."""


#: Kind of the row that tells a requester their approval card was refused for good.
DEAD_CARD_NOTICE = "dead_card_notice"


class DeadCard(BaseModel):
    """Payload of a ``dead_card_notice`` row."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    requester: str
    tool: str
    error: str
    channel: str | None = None


class Wait(Exception):
    """Not deliverable yet (e.g. the card to update is not posted); look again later."""

    def __init__(self, reason: str, seconds: float = CARD_WAIT_SECONDS) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seconds = seconds


@dataclass(frozen=True)
class Sent:
    """Where a row ended up, for the log; ``note`` says why nothing was posted."""

    channel: str | None
    ts: str | None
    note: str | None = None


@dataclass(frozen=True)
class _Thread:
    channel: str
    ts: str


async def send(db: Database, client: AsyncWebClient, row: OutboxRow) -> Sent:
    """Deliver ``row`` by kind; raises SlackApiError & co., Wait or Undeliverable."""
    if row.kind == "approval_card":
        # A later attempt may follow one that posted but never heard back: look first.
        return await send_card(db, client, ApprovalCard.model_validate(row.payload),
                               look_first=row.attempts > 1)
    if row.kind == "card_update":
        return await send_update(db, client, CardUpdate.model_validate(row.payload))
    if row.kind == "run_notice":
        return await send_notice(db, client, RunNotice.model_validate(row.payload))
    if row.kind == DEAD_CARD_NOTICE:
        return await send_dead_card_notice(client, DeadCard.model_validate(row.payload))
    raise Undeliverable(f"unknown outbox kind {row.kind!r}")


def dead_card_notice(row: OutboxRow, error: str) -> tuple[str, dict[str, Any]] | None:
    """The row telling a card's requester that Slack refused it; None for other rows."""
    if row.kind != "approval_card":
        return None
    try:
        card = ApprovalCard.model_validate(row.payload)
    except ValidationError:
        return None
    told = DeadCard(run_id=card.run_id, requester=card.requester, tool=card.tool,
                    error=error, channel=card.channel)
    return DEAD_CARD_NOTICE, told.model_dump()


async def send_dead_card_notice(client: AsyncWebClient, notice: DeadCard) -> Sent:
    """DM the requester: their request reached nobody, Slack's error, what to do."""
    text = undelivered.dead_card_dm(notice.run_id, notice.tool, notice.error, notice.channel)
    channel = await _dm(client, notice.requester)
    posted = await _post(client, channel=channel, text=text, blocks=[], thread_ts=None)
    return Sent(posted.channel, posted.ts)


async def send_card(
    db: Database, client: AsyncWebClient, card: ApprovalCard, *, look_first: bool = False
) -> Sent:
    """Post an approval card, at most once per token.

    The card's channel/ts are stored on its approval record as soon as the
    post returns, before the row is marked sent. If a previous attempt got
    that far and then died, the record already has a ts: nothing is posted
    again, the row is just marked sent. With ``look_first`` (an earlier attempt
    may have posted without recording it) a card already in Slack is adopted.
    A card that lands after its request was settled is updated to that outcome
    at once, so its buttons never stay live.
    """
    record = await claims.approval(db, card.token)
    if record is None:
        raise Undeliverable(f"no approval record for token of run {card.run_id}; "
                            "the run was purged or the payload is not from this database")
    if record.slack_ts is not None and record.slack_channel is not None:
        await runs.set_thread(db, card.run_id, record.slack_channel, record.slack_ts)
        return Sent(record.slack_channel, record.slack_ts, note="already posted")
    text, blocks = cards.approval_card(card)
    thread = await _card_thread(db, card)
    if thread is not None:
        channel, thread_ts = thread.channel, thread.ts
    else:
        channel = card.channel or await _dm(client, card.requester)
        thread_ts = None
    adopted = (await adopt.find_posted(client, card, channel=channel, thread_ts=thread_ts)
               if look_first else None)
    if adopted is not None:
        posted, note = _Thread(channel, adopted), "adopted the card already in Slack"
    else:
        posted = await _post(client, channel=channel, text=text, blocks=blocks,
                             thread_ts=thread_ts, metadata=adopt.metadata(card))
        note = None
    await _remember(db, card, posted.channel, posted.ts)
    if (late := await _settled_update(db, card)) is not None:
        text, blocks = cards.resolved_card(card, late)
        await client.chat_update(channel=posted.channel, ts=posted.ts, text=text, blocks=blocks)
        note = f"{note or 'posted'}; updated at once: the request is already {late.status}"
    return Sent(posted.channel, posted.ts, note=note)


async def _settled_update(db: Database, card: ApprovalCard) -> CardUpdate | None:
    """The update of this card that already went out while the card had no ts, if any."""
    for row in await outbox.for_run(db, card.run_id):
        if (row.kind == "card_update" and row.state is OutboxState.sent
                and row.payload.get("token") == card.token):
            return CardUpdate.model_validate(row.payload)
    return None


async def _remember(db: Database, card: ApprovalCard, channel: str, ts: str) -> None:
    """Record where the card landed, riding out a short database outage.

    The card is already in Slack: if this record were lost, the row's next
    attempt would post the card a second time. So the ts is held in memory and
    the write retried while the database is unavailable, before giving up.
    """

    async def write(attempt: int) -> None:
        await claims.set_card_ref(db, card.token, channel, ts)
        await runs.set_thread(db, card.run_id, channel, ts)

    try:
        await outage.hold(write, seconds=REMEMBER_FOR_SECONDS, run_id=card.run_id,
                          what=f"recording card {channel} {ts}")
    except errors.DatabaseUnavailable as exc:
        log.error("card for run %s was posted (%s %s) but could not be recorded; "
                  "a retry may post it again", card.run_id, channel, ts,
                  extra={"action": "card_ref_lost", "run_id": card.run_id})
        raise PostedUnrecorded(str(exc)) from exc


async def send_update(db: Database, client: AsyncWebClient, update: CardUpdate) -> Sent:
    """Replace the card of ``update.token``: buttons gone, a status line instead."""
    record = await claims.approval(db, update.token)
    if record is None:
        raise Undeliverable(f"no approval record for the card of run {update.run_id}")
    if record.slack_ts is None or record.slack_channel is None:
        if await _card_still_coming(db, update):
            raise Wait("the card to update is not posted yet")
        return Sent(None, None, note="card was never posted; nothing to update")
    card = ApprovalCard.model_validate(record.card)
    text, blocks = cards.resolved_card(card, update)
    await client.chat_update(
        channel=record.slack_channel, ts=record.slack_ts, text=text, blocks=blocks
    )
    return Sent(record.slack_channel, record.slack_ts)


async def send_notice(db: Database, client: AsyncWebClient, notice: RunNotice) -> Sent:
    """Post in the run's thread; without one, to the notice's channel or the requester's DM."""
    text, blocks = cards.run_notice(notice)
    run = await runs.find(db, notice.run_id)
    if run is not None and run.slack_channel is not None and run.slack_ts is not None:
        channel, thread_ts = run.slack_channel, run.slack_ts
    else:
        channel = notice.channel or await _dm(client, notice.requester)
        thread_ts = None
    posted = await _post(client, channel=channel, text=text, blocks=blocks, thread_ts=thread_ts)
    return Sent(posted.channel, posted.ts)


async def _card_thread(db: Database, card: ApprovalCard) -> _Thread | None:
    """Where a card goes: the run's thread (rooted at its first card) or the replaced card's."""
    run = await runs.find(db, card.run_id)
    root = (
        _Thread(run.slack_channel, run.slack_ts)
        if run is not None and run.slack_channel is not None and run.slack_ts is not None
        else None
    )
    if card.replaces_token is not None:
        replaced = await claims.approval(db, card.replaces_token)
        if replaced is not None and replaced.slack_channel and replaced.slack_ts:
            # Reply to the thread's root, not to a reply, when both are in one channel.
            if root is not None and root.channel == replaced.slack_channel:
                return root
            return _Thread(replaced.slack_channel, replaced.slack_ts)
    return root


async def _card_still_coming(db: Database, update: CardUpdate) -> bool:
    """True while an approval_card row of the run for this token is still pending."""
    for row in await outbox.for_run(db, update.run_id):
        if (
            row.kind == "approval_card"
            and row.state is OutboxState.pending
            and row.payload.get("token") == update.token
        ):
            return True
    return False


async def _dm(client: AsyncWebClient, user: str) -> str:
    """The DM channel with ``user`` (opened if need be)."""
    response = await client.conversations_open(users=user)
    channel: Any = (response.get("channel") or {}).get("id")
    if not isinstance(channel, str) or not channel:
        raise Undeliverable(f"conversations.open returned no channel for {user}")
    return channel


async def _post(
    client: AsyncWebClient,
    *,
    channel: str,
    text: str,
    blocks: list[dict[str, Any]],
    thread_ts: str | None,
    metadata: dict[str, Any] | None = None,
) -> _Thread:
    # Never unfurl: a link in a preview or an answer is data, not a page to show.
    response = await client.chat_postMessage(
        channel=channel, text=text, blocks=blocks, thread_ts=thread_ts,
        unfurl_links=False, unfurl_media=False, metadata=metadata,
    )
    posted_channel: Any = response.get("channel")
    ts: Any = response.get("ts")
    if not isinstance(ts, str) or not ts:
        raise Undeliverable("chat.postMessage answered ok without a ts")
    return _Thread(posted_channel if isinstance(posted_channel, str) else channel, ts)
