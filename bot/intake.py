"""The door in front of Bolt: refuse what Slack never sends before Bolt trips over it.

Bolt parses the body before it checks the signature, and its routing indexes
into the payload unguarded, so a body that is not UTF-8, a ``payload=`` that
is not a JSON object, or a block_actions without a list of actions makes it
raise, and aiohttp answers 500 (to anyone: no signature needed). This
middleware, on ``POST /slack/events`` only, answers first:

- 401 ``{"error": "invalid request"}`` (Bolt's own answer) unless the raw
  bytes carry a valid signature within the +-5 minute window;
- 400 ``{"error": "malformed request"}`` for a signed body that is not UTF-8,
  not parseable the way Bolt parses it, or missing a field the listeners read
  (with the type they read it as).

Everything else goes to Bolt unchanged, which verifies the signature again.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from slack_bolt.request.internals import parse_body

#: Slack's replay window: a request older (or newer) than this is refused.
MAX_SKEW_SECONDS = 300

Problem = Callable[[dict[str, Any]], str | None]


def middleware(path: str, signing_secret: str) -> Middleware:
    """An aiohttp middleware guarding ``POST path`` (see the module docstring)."""
    secret = signing_secret.encode()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "POST" or request.path != path:
            return await handler(request)
        raw = await request.read()  # aiohttp caches it: Bolt reads it again
        if not _signed(secret, raw, request.headers):
            return web.json_response({"error": "invalid request"}, status=401)
        if problem(raw, request.content_type) is not None:
            return web.json_response({"error": "malformed request"}, status=400)
        return await handler(request)

    return guard


def _signed(secret: bytes, raw: bytes, headers: Any) -> bool:
    stamp = headers.get("X-Slack-Request-Timestamp", "")
    given = headers.get("X-Slack-Signature", "")
    try:
        ts = int(stamp)
    except ValueError:
        return False
    if abs(time.time() - ts) > MAX_SKEW_SECONDS:
        return False
    expected = "v0=" + hmac.new(secret, b"v0:%d:" % ts + raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def problem(raw: bytes, content_type: str | None) -> str | None:
    """Why Bolt or a listener would trip over this body; None when it is well formed."""
    try:
        body = parse_body(raw.decode("utf-8"), content_type)
    except ValueError:  # not UTF-8, or a payload that is not JSON
        return "not a Slack payload"
    if not isinstance(body, dict):
        return "payload is not an object"
    envelope = _envelope(body)
    if envelope is not None:
        return envelope
    if "command" in body:
        return _command(body)
    kind = body.get("type")
    check = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    return check(body) if check is not None else None


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
    return None


def _user(body: dict[str, Any]) -> str | None:
    user = body.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str):
        return "no user id"
    return None


def _block_actions(body: dict[str, Any]) -> str | None:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return "no actions"
    if not all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions):
        return "an action without an action_id"
    for key in ("trigger_id", "response_url"):
        if not isinstance(body.get(key), str):
            return f"no {key}"
    return _user(body)


def _view_submission(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    if not isinstance(view, dict) or not isinstance(view.get("callback_id"), str):
        return "no view callback_id"
    if not isinstance(view.get("type"), str):  # Bolt's matchers index view["type"]
        return "no view type"
    if not isinstance(view.get("private_metadata", ""), str):
        return "private_metadata is not text"
    state = view.get("state", {})
    if not isinstance(state, dict) or not _nested_dicts(state.get("values", {}), depth=3):
        return "view state is not block -> action -> element"
    return _user(body)


def _nested_dicts(value: Any, depth: int) -> bool:
    if depth == 0:
        return True
    return isinstance(value, dict) and all(_nested_dicts(v, depth - 1) for v in value.values())


_BY_TYPE: dict[str, Problem] = {
    "block_actions": _block_actions,
    "view_submission": _view_submission,
}
