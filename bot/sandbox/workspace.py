"""The workspace behind the Slack stand-in: channels, messages, ephemerals and views.

``Workspace`` holds the state and applies Slack's rules for changing it; the records
here (``Message``, ``Ephemeral``, ``View``, ``Call``, ``ResponseTarget``) are what tests
and the sandbox page read back. The HTTP server around it is ``bot.sandbox.fake_slack``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

JSON = dict[str, Any]

TEAM_ID = "T0SANDBOX"
BOT_USER_ID = "U0SIGNOFF"
BOT_ID = "B0SIGNOFF"
_MAX_BLOCKS = 50  # Slack rejects more; slack_sdk's models do not check it.
_MAX_TEXT = 40_000
_FIRST_TS_MICROS = 1_700_000_000_000_000


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


def _json_arg(value: Any) -> Any:
    # Form-encoded calls carry blocks and views as JSON strings.
    if not isinstance(value, str) or value[:1] not in ("[", "{"):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise SlackError("invalid_arguments") from None


class Workspace:
    """Channels, messages, ephemerals and views, with Slack's rules for changing them."""

    def __init__(self, user_names: Mapping[str, str] | None = None) -> None:
        self.user_names = dict(user_names or {})
        self.channels: dict[str, JSON] = {}
        self.views: list[View] = []
        self._messages: dict[tuple[str, str], Message] = {}
        self._ephemerals: dict[str, Ephemeral] = {}
        self._used_triggers: set[str] = set()
        self._seq = 0

    def handlers(self) -> dict[str, Callable[[JSON], JSON]]:
        return {
            "auth.test": self.auth_test,
            "chat.postMessage": self.post_message,
            "chat.update": self.update,
            "chat.postEphemeral": self.post_ephemeral,
            "views.open": self.open_view,
            "conversations.open": self.open_conversation,
            "users.info": self.user_info,
            "users.lookupByEmail": self.lookup_by_email,
        }

    # -- reads ---------------------------------------------------------------

    def messages(self, channel: str | None = None) -> list[Message]:
        wanted = channel_id(channel) if channel else None
        return [m for m in self._messages.values() if wanted in (None, m.channel)]

    def ephemerals(self, user: str | None = None) -> list[Ephemeral]:
        return [e for e in self._ephemerals.values() if user in (None, e.user)]

    def state(self) -> JSON:
        """Everything, threads nested under their parents, for the sandbox page."""
        top = [asdict(m) for m in self._messages.values() if m.thread_ts in (None, m.ts)]
        for parent in top:
            parent["replies"] = [
                asdict(m)
                for m in self._messages.values()
                if m.channel == parent["channel"]
                and m.thread_ts == parent["ts"]
                and m.ts != parent["ts"]
            ]
        return {
            "channels": list(self.channels.values()),
            "messages": top,
            "ephemerals": [asdict(e) for e in self._ephemerals.values()],
            "views": [asdict(v) for v in self.views],
        }

    # -- Web API methods -----------------------------------------------------

    def auth_test(self, args: JSON) -> JSON:
        return {
            "url": "https://sandbox.slack.invalid/",
            "team": "Sandbox",
            "user": "signoff",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def post_message(self, args: JSON) -> JSON:
        channel = self._channel_arg(args)
        text, blocks = self._content(args)
        message = self._add_message(channel, text, blocks, args.get("thread_ts"))
        return {"channel": channel, "ts": message.ts, "message": _message_json(message)}

    def update(self, args: JSON) -> JSON:
        channel = self._channel_arg(args)
        message = self._messages.get((channel, str(args.get("ts", ""))))
        if message is None:
            raise SlackError("message_not_found")
        # Only what is given is replaced; omitting blocks does not clear them.
        text, blocks = self._content(args, current=message)
        message.text, message.blocks, message.edits = text, blocks, message.edits + 1
        return {
            "channel": channel,
            "ts": message.ts,
            "text": text,
            "message": _message_json(message),
        }

    def post_ephemeral(self, args: JSON) -> JSON:
        channel = self._channel_arg(args)
        user = str(args.get("user") or "")
        if not user:
            raise SlackError("user_not_found")
        text, blocks = self._content(args)
        ephemeral = self._add_ephemeral(channel, user, text, blocks, args.get("thread_ts"))
        return {"message_ts": ephemeral.ts}

    def open_view(self, args: JSON) -> JSON:
        trigger_id = str(args.get("trigger_id") or "")
        view = _json_arg(args.get("view"))
        if not trigger_id or not isinstance(view, dict):
            raise SlackError("invalid_arguments")
        # Triggers are single-use in Slack; a second open is a bug worth seeing.
        if trigger_id in self._used_triggers:
            raise SlackError("expired_trigger_id")
        self._used_triggers.add(trigger_id)
        stored = View(id=f"V{self._next_seq():08d}", trigger_id=trigger_id, view=view)
        self.views.append(stored)
        return {"view": {**view, "id": stored.id, "team_id": TEAM_ID}}

    def open_conversation(self, args: JSON) -> JSON:
        if args.get("channel"):
            return {"channel": {"id": self._channel_arg(args)}}
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if len(users) != 1:
            raise SlackError("users_list_not_supplied" if not users else "not_supported")
        return {"channel": {"id": self._open_channel(users[0])}}

    def user_info(self, args: JSON) -> JSON:
        user = str(args.get("user") or "")
        if user[:1] not in ("U", "W"):
            raise SlackError("user_not_found")
        name = self.user_names.get(user, user.lower())
        return {
            "user": {
                "id": user,
                "team_id": TEAM_ID,
                "name": name,
                "real_name": name.title(),
                "is_bot": False,
                "profile": {"display_name": name, "real_name": name.title()},
            }
        }

    def lookup_by_email(self, args: JSON) -> JSON:
        """``name@...`` finds the user whose name is ``name``, as a workspace directory would."""
        local = str(args.get("email") or "").partition("@")[0].lower()
        for user, name in self.user_names.items():
            if name.lower() == local:
                return self.user_info({"user": user})
        raise SlackError("users_not_found")

    # -- response_url --------------------------------------------------------

    def respond(self, target: ResponseTarget, body: JSON) -> None:
        """Apply a response_url post the way Slack does.

        ``replace_original`` / ``delete_original`` act on the message the URL came
        from (a channel message or an ephemeral). Otherwise a new message is posted:
        ``in_channel`` to the channel, else (Slack's default) ephemeral to the user.
        """
        if body.get("delete_original"):
            self._delete(self._source(target))
        elif body.get("replace_original"):
            source = self._source(target)
            source.text, source.blocks = self._content({"text": "", **body})
            source.edits += 1
        elif body.get("response_type") == "in_channel":
            text, blocks = self._content(body)
            self._add_message(target.channel, text, blocks, body.get("thread_ts"))
        elif target.user is None:
            raise SlackError("no_user")
        else:
            text, blocks = self._content(body)
            self._add_ephemeral(target.channel, target.user, text, blocks, body.get("thread_ts"))

    def _source(self, target: ResponseTarget) -> Message | Ephemeral:
        ts = target.message_ts or ""
        found = self._ephemerals.get(ts) or self._messages.get((target.channel, ts))
        if found is None:
            raise SlackError("message_not_found")
        return found

    def _delete(self, source: Message | Ephemeral) -> None:
        if isinstance(source, Ephemeral):
            del self._ephemerals[source.ts]
        else:
            del self._messages[(source.channel, source.ts)]

    # -- helpers -------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _next_ts(self) -> str:
        # Slack ts values are strings that sort in posting order.
        micros = _FIRST_TS_MICROS + self._next_seq() * 100
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _open_channel(self, raw: str) -> str:
        channel = channel_id(raw)
        if channel not in self.channels:
            entry: JSON = {"id": channel, "is_im": channel.startswith("D")}
            if channel != raw:
                entry["user"] = raw
            self.channels[channel] = entry
        return channel

    def _channel_arg(self, args: JSON) -> str:
        raw = str(args.get("channel") or "")
        if not raw:
            raise SlackError("channel_not_found")
        return self._open_channel(raw)

    def _content(self, args: JSON, current: Message | None = None) -> tuple[str, list[JSON]]:
        text = args.get("text", current.text if current else None)
        blocks = _json_arg(args.get("blocks", current.blocks if current else None))
        if not text and not blocks:
            raise SlackError("no_text")
        if blocks is not None and not isinstance(blocks, list):
            raise SlackError("invalid_blocks")
        if blocks and len(blocks) > _MAX_BLOCKS:
            raise SlackError("invalid_blocks")
        if text and len(str(text)) > _MAX_TEXT:
            raise SlackError("msg_too_long")
        return str(text or ""), list(blocks or [])

    def _add_message(self, channel: str, text: str, blocks: list[JSON], thread_ts: Any) -> Message:
        message = Message(channel, self._next_ts(), text, blocks, _opt_str(thread_ts))
        self._messages[(channel, message.ts)] = message
        return message

    def _add_ephemeral(
        self, channel: str, user: str, text: str, blocks: list[JSON], thread_ts: Any
    ) -> Ephemeral:
        ephemeral = Ephemeral(channel, user, self._next_ts(), text, blocks, _opt_str(thread_ts))
        self._ephemerals[ephemeral.ts] = ephemeral
        return ephemeral


def _opt_str(value: Any) -> str | None:
    return str(value) if value else None


def _message_json(message: Message) -> JSON:
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
    return body
