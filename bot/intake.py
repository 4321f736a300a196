"""The door in front of Bolt: only signed, first-seen requests the bot handles get through.

Bolt parses the body before it checks the signature, and its routing indexes
into the payload unguarded, so a malformed body makes it raise and aiohttp
answers 500. This middleware, on ``POST /slack/events`` only, answers first:

- 401 ``{"error": "invalid request"}`` (Bolt's own answer) unless the raw
  bytes carry a valid signature within the +-5 minute window;
- 200 with an empty body, doing nothing, for a delivery Slack marks as a retry
  (``X-Slack-Retry-Num``): the first delivery was the one acted on;
- 400 ``{"error": "malformed request"}`` for a signed body that is not one of
  the requests the bot handles (``bot.payloads``): not UTF-8, nested too deep,
  of a payload type, command, action or callback id signoff has no listener
  for, or missing a field the listeners read;
- 409 ``{"error": "request already seen"}`` for the same signed slash command
  (same timestamp and signature) a second time, on this replica or another one
  sharing the database (``store.seen``). Clicks and decline submissions are not
  recorded: each carries a single-use token, so a replay is told the request was
  already decided and changes nothing, and the click's ack waits on no write.

Everything else goes to Bolt unchanged, which verifies the signature again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from bot import payloads
from store import errors
from store.engine import Database
from store.seen import SeenRequests

log = logging.getLogger(__name__)

#: Slack's replay window: a request older (or newer) than this is refused.
MAX_SKEW_SECONDS = 300
#: How long a seen signature is kept past its timestamp: the window, plus room for
#: replicas whose clocks disagree by up to a minute.
KEEP_SEEN_SECONDS = MAX_SKEW_SECONDS + 60


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
        raw = await request.read()  # aiohttp caches it: Bolt reads it again
        stamp = _signed(secret, raw, request.headers)
        if stamp is None:
            return web.json_response({"error": "invalid request"}, status=401)
        if "X-Slack-Retry-Num" in request.headers:
            _refused("slack_retry", request)
            return web.Response(status=200)
        why = payloads.problem(raw, request.content_type)
        if why is not None:
            _refused("malformed_request", request, why)
            return web.json_response({"error": "malformed request"}, status=400)
        if (seen is not None and payloads.is_command(raw, request.content_type)
                and not await _first_sight(seen, stamp, request)):
            _refused("replayed_request", request)
            return web.json_response({"error": "request already seen"}, status=409)
        return await handler(request)

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
        # Let it through: everything a request can change lives in the same database,
        # so the listener meets the same outage and tells the person to try again.
        log.warning("could not record a request as seen: %s", exc,
                    extra={"action": "seen_unrecorded", "error": str(exc)})
        return True


def _refused(action: str, request: web.Request, why: str | None = None) -> None:
    log.info("refused at the door: %s%s", action, f" ({why})" if why else "",
             extra={"action": action, "reason": why,
                    "retry_num": request.headers.get("X-Slack-Retry-Num")})
