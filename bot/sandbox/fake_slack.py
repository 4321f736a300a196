"""A local stand-in for Slack's Web API and ``response_url``.

The test-suite and ``signoff sandbox`` point ``AsyncWebClient(base_url=...)`` at it,
so the real slack_sdk client (retry handlers included) talks HTTP to something that
answers like Slack. State is in memory; every call is recorded; failures can be
injected per method or for a window of time, so retries and the outbox can be
exercised without a workspace.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

JSON = dict[str, Any]

TEAM_ID = "T0SANDBOX"
BOT_USER_ID = "U0SIGNOFF"
BOT_ID = "B0SIGNOFF"
#: The method name under which response_url posts are recorded and can be failed.
RESPONSE_URL = "response_url"
#: Slack lets a response_url be used five times (within 30 minutes).
RESPONSE_URL_USES = 5
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
class _Failure:
    method: str
    status: int
    error: str
    retry_after: int
    remaining: int


@dataclass(slots=True)
class ResponseTarget:
    """What a response_url was issued for."""

    channel: str
    message_ts: str | None
    user: str | None
    uses: int = 0


class _SlackError(Exception):
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
        raise _SlackError("invalid_arguments") from None


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
            raise _SlackError("message_not_found")
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
            raise _SlackError("user_not_found")
        text, blocks = self._content(args)
        ephemeral = self._add_ephemeral(channel, user, text, blocks, args.get("thread_ts"))
        return {"message_ts": ephemeral.ts}

    def open_view(self, args: JSON) -> JSON:
        trigger_id = str(args.get("trigger_id") or "")
        view = _json_arg(args.get("view"))
        if not trigger_id or not isinstance(view, dict):
            raise _SlackError("invalid_arguments")
        # Triggers are single-use in Slack; a second open is a bug worth seeing.
        if trigger_id in self._used_triggers:
            raise _SlackError("expired_trigger_id")
        self._used_triggers.add(trigger_id)
        stored = View(id=f"V{self._next_seq():08d}", trigger_id=trigger_id, view=view)
        self.views.append(stored)
        return {"view": {**view, "id": stored.id, "team_id": TEAM_ID}}

    def open_conversation(self, args: JSON) -> JSON:
        if args.get("channel"):
            return {"channel": {"id": self._channel_arg(args)}}
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if len(users) != 1:
            raise _SlackError("users_list_not_supplied" if not users else "not_supported")
        return {"channel": {"id": self._open_channel(users[0])}}

    def user_info(self, args: JSON) -> JSON:
        user = str(args.get("user") or "")
        if user[:1] not in ("U", "W"):
            raise _SlackError("user_not_found")
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
            raise _SlackError("no_user")
        else:
            text, blocks = self._content(body)
            self._add_ephemeral(target.channel, target.user, text, blocks, body.get("thread_ts"))

    def _source(self, target: ResponseTarget) -> Message | Ephemeral:
        ts = target.message_ts or ""
        found = self._ephemerals.get(ts) or self._messages.get((target.channel, ts))
        if found is None:
            raise _SlackError("message_not_found")
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
            raise _SlackError("channel_not_found")
        return self._open_channel(raw)

    def _content(self, args: JSON, current: Message | None = None) -> tuple[str, list[JSON]]:
        text = args.get("text", current.text if current else None)
        blocks = _json_arg(args.get("blocks", current.blocks if current else None))
        if not text and not blocks:
            raise _SlackError("no_text")
        if blocks is not None and not isinstance(blocks, list):
            raise _SlackError("invalid_blocks")
        if blocks and len(blocks) > _MAX_BLOCKS:
            raise _SlackError("invalid_blocks")
        if text and len(str(text)) > _MAX_TEXT:
            raise _SlackError("msg_too_long")
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


def _http_error(status: int) -> str:
    return "ratelimited" if status == 429 else "fatal_error"


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


async def _read_args(request: web.Request) -> JSON:
    """Query string, then form or JSON body, merged: slack_sdk uses all three."""
    args: JSON = dict(request.query)
    if not request.can_read_body:
        return args
    if request.content_type == "application/json":
        body = await request.json()
        if not isinstance(body, dict):
            raise _SlackError("invalid_json")
        args.update(body)
    else:
        args.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return args


def _answer(
    payload: JSON, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(payload, status=status, headers=headers)


class FakeSlack:
    """The Web API stand-in as a server: ``async with FakeSlack() as fake: ...``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        user_names: Mapping[str, str] | None = None,
    ) -> None:
        self.workspace = Workspace(user_names)
        self._host, self._port = host, port
        self._handlers = self.workspace.handlers()
        self._calls: list[Call] = []
        self._failures: list[_Failure] = []
        self._outage_until = 0.0
        self._outage_status = 500
        self._targets: dict[str, ResponseTarget] = {}
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_route("*", "/api/{method}", self._api)
        self.app.router.add_post("/response/{id}", self._response)
        self.app.router.add_get("/_state", self._state)

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self._port = int(self._runner.addresses[0][1])  # port 0 -> the one the OS chose

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def api_url(self) -> str:
        """For ``AsyncWebClient(base_url=...)``; slack_sdk appends the method name."""
        return f"{self.base_url}/api/"

    def response_url(
        self, channel: str, *, message_ts: str | None = None, user: str | None = None
    ) -> str:
        """A URL to put in a payload's ``response_url``.

        ``message_ts`` names the message a click came from (what replace_original and
        delete_original act on); ``user`` receives ephemeral responses.
        """
        target_id = f"R{len(self._targets) + 1:06d}"
        self._targets[target_id] = ResponseTarget(channel_id(channel), message_ts, user)
        return f"{self.base_url}/response/{target_id}"

    # -- failure injection ---------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int | None = None,
        retry_after: int = 1,
        count: int = 1,
        error: str | None = None,
    ) -> None:
        """Fail the next ``count`` calls of ``method`` (``"*"`` for any).

        With ``error`` the answer is HTTP 200 ``ok: false``; otherwise ``status``
        (429 by default, with ``Retry-After: retry_after``; 500, 503, ...).
        """
        if error is not None:
            failure = _Failure(method, 200, error, retry_after, count)
        else:
            status = status or 429
            failure = _Failure(method, status, _http_error(status), retry_after, count)
        self._failures.append(failure)

    def outage(self, seconds: float, *, status: int = 500) -> None:
        """Every call (response_url posts too) fails for the next ``seconds``."""
        self._outage_until = time.monotonic() + seconds
        self._outage_status = status

    def clear_failures(self) -> None:
        self._failures.clear()
        self._outage_until = 0.0

    def _take_failure(self, method: str) -> _Failure | None:
        left = self._outage_until - time.monotonic()
        if left > 0:
            status = self._outage_status
            return _Failure("*", status, _http_error(status), max(1, math.ceil(left)), 1)
        for failure in self._failures:
            if failure.method in ("*", method):
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return failure
        return None

    # -- reads for tests and the sandbox page --------------------------------

    def messages(self, channel: str | None = None) -> list[Message]:
        """Channel messages as they stand now, thread replies included, oldest first."""
        return self.workspace.messages(channel)

    def ephemerals(self, user: str | None = None) -> list[Ephemeral]:
        return self.workspace.ephemerals(user)

    @property
    def views(self) -> list[View]:
        return list(self.workspace.views)

    def calls(self, method: str | None = None) -> list[Call]:
        """Every request received, failed ones included, in arrival order."""
        return [c for c in self._calls if method in (None, c.method)]

    # -- HTTP ----------------------------------------------------------------

    def _record(self, method: str, args: JSON) -> Call:
        body = {k: v for k, v in args.items() if k != "token"}
        call = Call(method=method, body=body, at=time.time())
        self._calls.append(call)
        return call

    def _injected(self, call: Call) -> web.Response | None:
        failure = self._take_failure(call.method)
        if failure is None:
            return None
        call.status, call.error = failure.status, failure.error
        headers = {"Retry-After": str(failure.retry_after)} if failure.status == 429 else None
        return _answer({"ok": False, "error": failure.error}, failure.status, headers)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        try:
            args = await _read_args(request)
        except (ValueError, _SlackError):
            return _answer({"ok": False, "error": "invalid_json"})
        call = self._record(method, args)
        if (failed := self._injected(call)) is not None:
            return failed
        try:
            _check_token(request, args)
            handler = self._handlers.get(method)
            if handler is None:
                raise _SlackError("unknown_method")
            return _answer({"ok": True, **handler(args)})
        except _SlackError as exc:
            call.error = exc.error
            return _answer({"ok": False, "error": exc.error})

    async def _response(self, request: web.Request) -> web.Response:
        target = self._targets.get(request.match_info["id"])
        try:
            body = await request.json()
        except ValueError:
            body = None
        call = self._record(RESPONSE_URL, body if isinstance(body, dict) else {})
        if (failed := self._injected(call)) is not None:
            return failed
        if target is None or target.uses >= RESPONSE_URL_USES:
            call.status, call.error = 404, "used_url" if target else "invalid_url"
            return _answer({"ok": False, "error": call.error}, 404)
        if not isinstance(body, dict):
            call.status, call.error = 400, "invalid_payload"
            return _answer({"ok": False, "error": call.error}, 400)
        target.uses += 1
        try:
            self.workspace.respond(target, body)
        except _SlackError as exc:
            call.status, call.error = 400, exc.error
            return _answer({"ok": False, "error": exc.error}, 400)
        return _answer({"ok": True})

    async def _state(self, request: web.Request) -> web.Response:
        return _answer(self.workspace.state())


def _check_token(request: web.Request, args: JSON) -> None:
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else args.get("token")
    if not token:
        raise _SlackError("not_authed")
    if not str(token).startswith("xoxb-"):
        raise _SlackError("invalid_auth")
