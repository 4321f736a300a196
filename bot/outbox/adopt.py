"""Finding an approval card already in Slack, so a retry adopts it instead of posting twice.

Every card is posted with message metadata naming its run and token
(``ids.CARD_EVENT_TYPE``). When an earlier attempt at the row may have posted
it (the process died, or Slack's answer was lost), the channel or thread is
read back first: the card found there is recorded as the one posted.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ids
from resume.outbox import ApprovalCard

log = logging.getLogger(__name__)

#: How many recent messages are looked through: a retry comes minutes after the post.
LOOK_BACK = 200


def metadata(card: ApprovalCard) -> dict[str, Any]:
    """What every approval card carries, so it can be found again."""
    return {"event_type": ids.CARD_EVENT_TYPE,
            "event_payload": {"run_id": card.run_id, "token": card.token}}


async def find_posted(
    client: AsyncWebClient, card: ApprovalCard, *, channel: str, thread_ts: str | None
) -> str | None:
    """The ts of ``card`` if it is already in ``channel`` (or that thread), else None.

    A failed look is not fatal: posting again is the lesser harm than a card never posted.
    """
    try:
        if thread_ts is not None:
            response = await client.conversations_replies(
                channel=channel, ts=thread_ts, include_all_metadata=True, limit=LOOK_BACK)
        else:
            response = await client.conversations_history(
                channel=channel, include_all_metadata=True, limit=LOOK_BACK)
    except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
        log.warning("could not look for the card of run %s in %s before posting it again: %s",
                    card.run_id, channel, exc,
                    extra={"action": "card_lookup_failed", "run_id": card.run_id})
        return None
    for message in response.get("messages") or []:
        if _is_card(message, card):
            ts = message.get("ts")
            return ts if isinstance(ts, str) and ts else None
    return None


def _is_card(message: Any, card: ApprovalCard) -> bool:
    if not isinstance(message, dict):
        return False
    meta = message.get("metadata") or {}
    payload = meta.get("event_payload") or {}
    return (meta.get("event_type") == ids.CARD_EVENT_TYPE
            and payload.get("token") == card.token and payload.get("run_id") == card.run_id)
