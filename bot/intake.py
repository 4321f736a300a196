"""The HTTP door in front of Bolt: only signed, first-seen requests the bot handles get in.

Bolt parses the body before it checks the signature, and its routing indexes into the payload
unguarded, so a malformed body makes it raise and aiohttp answers 500. ``middleware``, on
``POST /slack/events`` only, answers first:

- 401 ``{"error": "invalid request"}`` (Bolt's own answer) unless the raw bytes carry a valid
  signature within the +-5 minute window;
- 200, empty, doing nothing, for a delivery Slack marks as a retry (``X-Slack-Retry-Num``);
- 400 ``{"error": "malformed request"}`` for a signed body that is not one of the requests the
  bot handles (``problem``): not UTF-8, nested deeper than :data:`MAX_DEPTH`, of a payload type,
  command, action or callback id signoff has no listener for, or missing a field Bolt or a
  listener reads, or of another type than they read it as;
- 409 ``{"error": "request already seen"}`` for the same signed slash command (same timestamp
  and signature) again, on any replica sharing the database (``store.seen``). Clicks and
  decline submissions carry a single-use token, so a replay is told "already decided" and
  changes nothing: they are not recorded, and the click's ack waits on no write.

Everything else goes to Bolt unchanged, which verifies the signature again. Inside Bolt, on
every door (HTTP and Socket Mode), ``Services.into_context`` hands the services only to a
request from the bot's own workspace (``bot/services.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from slack_bolt.request.internals import parse_body

from bot import ids, metrics
from store import errors
from store.engine import Database
from store.seen import SeenRequests

log = logging.getLogger(__name__)

#: Slack's replay window: a request older (or newer) than this is refused.
MAX_SKEW_SECONDS = 300
#: How long a seen signature is kept: the window, plus a minute of replicas' clock skew.
KEEP_SEEN_SECONDS = MAX_SKEW_SECONDS + 60
#: Deepest nesting of objects and lists a handled payload may have; Slack's own stay well under.
MAX_DEPTH = 64
ACTIONS = frozenset({ids.APPROVE_ACTION, ids.DECLINE_ACTION})
CALLBACKS = frozenset({ids.DECLINE_REASON_CALLBACK})
Problem = Callable[[dict[str, Any]], str | None]


def middleware(path: str, signing_secret: str, db: Database | None = None) -> Middleware:
    """An aiohttp middleware guarding ``POST path`` (see the module docstring).

    Without ``db`` replays are not checked (only for tests of the shapes alone).
    """
    secret = signing_secret.encode()
    seen = SeenRequests(db, keep_seconds=KEEP_SEEN_SECONDS) if db is not None else None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "POST" or request.path != path:
            return await handler(request)
        start = time.perf_counter()  # a click's ack time includes the door's checks
        raw = await request.read()  # aiohttp caches it: Bolt reads it again
        stamp = _signed(secret, raw, request.headers)
        if stamp is None:
            return web.json_response({"error": "invalid request"}, status=401)
        if "X-Slack-Retry-Num" in request.headers:
            _refused("slack_retry", request)
            return web.Response(status=200)
        why = problem(raw, request.content_type)
        if why is not None:
            _refused("malformed_request", request, why)
            return web.json_response({"error": "malformed request"}, status=400)
        if (seen is not None and is_command(raw, request.content_type)
                and not await _first_sight(seen, stamp, request)):
            _refused("replayed_request", request)
            return web.json_response({"error": "request already seen"}, status=409)
        response = await handler(request)  # Bolt answers when the listener acks
        # Interactivity (a click, a submission), not a command; acked, not refused by Bolt.
        if raw.startswith(b"payload=") and response.status == 200:
            metrics.acked("http", time.perf_counter() - start)
        return response

    return guard


def _signed(secret: bytes, raw: bytes, headers: Any) -> int | None:
    """The request's timestamp when its signature is valid and inside the window."""
    stamp = headers.get("X-Slack-Request-Timestamp", "")
    given = headers.get("X-Slack-Signature", "")
    try:
        ts = int(stamp)
    except ValueError:
        return None
    if abs(time.time() - ts) > MAX_SKEW_SECONDS:
        return None
    expected = "v0=" + hmac.new(secret, b"v0:%d:" % ts + raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
        return None
    return ts


async def _first_sight(seen: SeenRequests, stamp: int, request: web.Request) -> bool:
    try:
        return await seen.first_sight(stamp, request.headers["X-Slack-Signature"])
    except errors.DatabaseUnavailable as exc:
        # Let it through: the listener meets the same outage and tells the person to retry.
        log.warning("could not record a request as seen: %s", exc,
                    extra={"action": "seen_unrecorded", "error": str(exc)})
        return True


def _refused(action: str, request: web.Request, why: str | None = None) -> None:
    log.info("refused at the door: %s%s", action, f" ({why})" if why else "", extra={
        "action": action, "reason": why, "retry_num": request.headers.get("X-Slack-Retry-Num")})


# --- The requests signoff handles ---------------------------------------------------------
def problem(raw: bytes, content_type: str | None) -> str | None:
    """Why this body is not a request signoff handles; None when it is one.

    Handled, as an allow-list: ``/signoff`` slash commands; ``block_actions`` whose every action
    is the card's Approve or Decline; the decline-reason modal's ``view_submission``; Slack's
    ``ssl_check`` of the command URL (Bolt answers it).
    """
    try:
        body = parse_body(raw.decode("utf-8"), content_type)
    except ValueError:  # not UTF-8, or a payload that is not JSON
        return "not a Slack payload"
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH}"
    if not isinstance(body, dict):
        return "payload is not an object"
    if _depth(body) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH}"
    if body.get("ssl_check") == "1":
        return None
    envelope = _envelope(body)
    if envelope is not None:
        return envelope
    if "command" in body:
        return _command(body)
    kind = body.get("type")
    check = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if check is None:
        return f"not a request signoff handles (type {str(kind)[:40]!r})"
    return check(body)


def is_command(raw: bytes, content_type: str | None) -> bool:
    """A slash command: the one kind of request a replay could repeat (see the module docstring)."""
    if content_type != "application/x-www-form-urlencoded":
        return False
    try:
        body = parse_body(raw.decode("utf-8"), content_type)
    except (ValueError, RecursionError):
        return False
    return isinstance(body, dict) and "command" in body


def _depth(value: Any) -> int:
    """How deep objects and lists nest in ``value``, without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list))
    return deepest


#: Envelope keys Bolt reads (building the context, routing, logging an unhandled
#: request) without checking their type, and the types Slack sends them as.
_OBJECT_OR_ID = (dict, str, type(None))
_ENVELOPE: dict[str, tuple[type, ...]] = {
    "type": (str, type(None)),
    "team": _OBJECT_OR_ID, "enterprise": _OBJECT_OR_ID, "user": _OBJECT_OR_ID,
    "channel": _OBJECT_OR_ID,
    "view": (dict,), "container": (dict,), "message": (dict,), "previous_message": (dict,),
    "event": (dict,), "item": (dict,), "assistant_thread": (dict,), "function_data": (dict,),
    "authorizations": (list,), "actions": (list,), "response_urls": (list,),
}
_LISTS_OF_OBJECTS = ("authorizations", "actions", "response_urls")


def _envelope(body: dict[str, Any]) -> str | None:
    for key, types in _ENVELOPE.items():
        if key in body and not isinstance(body[key], types):
            return f"{key} is a {type(body[key]).__name__}"
    for key in _LISTS_OF_OBJECTS:
        if not all(isinstance(item, dict) for item in body.get(key) or []):
            return f"{key} holds something other than objects"
    return None


def _command(body: dict[str, Any]) -> str | None:
    for key in ("command", "user_id", "response_url"):
        if not isinstance(body.get(key), str):
            return f"command without {key}"
    if body["command"] != ids.COMMAND:
        return "not a command signoff has"
    return None


def _user(body: dict[str, Any]) -> str | None:
    user = body.get("user")
    return None if isinstance(user, dict) and isinstance(user.get("id"), str) else "no user id"


def _block_actions(body: dict[str, Any]) -> str | None:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return "no actions"
    if not all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions):
        return "an action without an action_id"
    if not all(a["action_id"] in ACTIONS for a in actions):
        return "an action signoff has no button for"
    for key in ("trigger_id", "response_url"):
        if not isinstance(body.get(key), str):
            return f"no {key}"
    return _user(body)


def _view_submission(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    if not isinstance(view, dict) or not isinstance(view.get("callback_id"), str):
        return "no view callback_id"
    if view["callback_id"] not in CALLBACKS:
        return "a view signoff did not open"
    if not isinstance(view.get("type"), str):  # Bolt's matchers index view["type"]
        return "no view type"
    if not isinstance(view.get("private_metadata", ""), str):
        return "private_metadata is not text"
    state = view.get("state", {})
    if not isinstance(state, dict) or not _nested_dicts(state.get("values", {}), depth=3):
        return "view state is not block -> action -> element"
    return _user(body)


def _nested_dicts(value: Any, depth: int) -> bool:
    return depth == 0 or (isinstance(value, dict)
                          and all(_nested_dicts(v, depth - 1) for v in value.values()))


_BY_TYPE: dict[str, Problem] = {"block_actions": _block_actions,
                                "view_submission": _view_submission}
