"""What the Slack stand-in stores and answers with: messages, ephemerals, views, calls.

These records are what tests and the sandbox page read back; ``Workspace``
(``bot.sandbox.workspace``) holds them and applies Slack's rules for changing them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]

TEAM_ID = "T0SANDBOX"
BOT_USER_ID = "U0SIGNOFF"
BOT_ID = "B0SIGNOFF"


@dataclass(slots=True)
class Message:
    """A channel message as it stands now (after any updates)."""

    channel: str
    ts: str
    text: str
    blocks: list[JSON]
    thread_ts: str | None = None
    user: str = BOT_USER_ID
    #: How many times it was replaced (chat.update or replace_original).
    edits: int = 0
    #: Message metadata as posted (``event_type``, ``event_payload``), if any.
    metadata: JSON | None = None


@dataclass(slots=True)
class Ephemeral:
    """A message only ``user`` can see; replaceable only through a response_url."""

    channel: str
    user: str
    ts: str
    text: str
    blocks: list[JSON]
    thread_ts: str | None = None
    edits: int = 0


@dataclass(slots=True)
class View:
    id: str
    trigger_id: str
    view: JSON


@dataclass(slots=True)
class Call:
    """One request as received, failed or not."""

    method: str
    body: JSON
    at: float
    status: int = 200
    error: str | None = None


@dataclass(slots=True)
class ResponseTarget:
    """What a response_url was issued for."""

    channel: str
    message_ts: str | None
    user: str | None
    uses: int = 0


class SlackError(Exception):
    """An ``ok: false`` answer; the argument is Slack's error code."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def dm_channel(user: str) -> str:
    """The DM channel id for a user: stable, so tests can predict it."""
    return "D" + user[1:]


def channel_id(raw: str) -> str:
    """Posting to a user id means "DM them": Slack answers with the D channel."""
    return dm_channel(raw) if raw[:1] in ("U", "W") else raw


def json_arg(value: Any) -> Any:
    # Form-encoded calls carry blocks and views as JSON strings.
    if not isinstance(value, str) or value[:1] not in ("[", "{"):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise SlackError("invalid_arguments") from None


def message_json(message: Message, *, with_metadata: bool = False) -> JSON:
    body: JSON = {
        "type": "message",
        "user": message.user,
        "bot_id": BOT_ID,
        "text": message.text,
        "blocks": message.blocks,
        "ts": message.ts,
    }
    if message.thread_ts:
        body["thread_ts"] = message.thread_ts
    if with_metadata and message.metadata is not None:
        body["metadata"] = message.metadata
    return body
