"""A local stand-in for Slack's Web API and ``response_url``.

The test-suite and ``signoff sandbox`` point ``AsyncWebClient(base_url=...)`` at it,
so the real slack_sdk client (retry handlers included) talks HTTP to something that
answers like Slack. State is in memory (``bot.sandbox.workspace``); every call is
recorded; failures can be injected per method or for a window of time, so retries
and the outbox can be exercised without a workspace.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType

from aiohttp import web

from bot.sandbox import socket_mode, workspace

# Everything the workspace exports is this module's too (callers write fake_slack.Message).
from bot.sandbox.workspace import *  # noqa: F403
from bot.sandbox.workspace import (
    JSON,
    Call,
    Ephemeral,
    Message,
    ResponseTarget,
    View,
    Workspace,
    channel_id,
)

__all__ = ["RESPONSE_URL", "RESPONSE_URL_USES", "FakeSlack"]
__all__ += workspace.__all__

#: The method name under which response_url posts are recorded and can be failed.
RESPONSE_URL = "response_url"
#: Slack lets a response_url be used five times (within 30 minutes).
RESPONSE_URL_USES = 5


@dataclass(slots=True)
class _Failure:
    method: str
    status: int
    error: str
    retry_after: int
    remaining: int


def _http_error(status: int) -> str:
    return "ratelimited" if status == 429 else "fatal_error"


async def _read_args(request: web.Request) -> JSON:
    """Query string, then form or JSON body, merged: slack_sdk uses all three."""
    args: JSON = dict(request.query)
    if not request.can_read_body:
        return args
    if request.content_type == "application/json":
        body = await request.json()
        if not isinstance(body, dict):
            raise workspace.SlackError("invalid_json")
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
        self.socket_mode = socket_mode.SocketModeServer(self.app, lambda: self.base_url)
        self._handlers["apps.connections.open"] = self.socket_mode.open_connection

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
        except (ValueError, workspace.SlackError):
            return _answer({"ok": False, "error": "invalid_json"})
        call = self._record(method, args)
        if (failed := self._injected(call)) is not None:
            return failed
        try:
            _check_token(request, args, "xapp-" if method in socket_mode.APP_LEVEL_METHODS
                         else "xoxb-")
            handler = self._handlers.get(method)
            if handler is None:
                raise workspace.SlackError("unknown_method")
            return _answer({"ok": True, **handler(args)})
        except workspace.SlackError as exc:
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
        except workspace.SlackError as exc:
            call.status, call.error = 400, exc.error
            return _answer({"ok": False, "error": exc.error}, 400)
        return _answer({"ok": True})

    async def _state(self, request: web.Request) -> web.Response:
        return _answer(self.workspace.state())


def _check_token(request: web.Request, args: JSON, prefix: str) -> None:
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else args.get("token")
    if not token:
        raise workspace.SlackError("not_authed")
    if not str(token).startswith(prefix):
        raise workspace.SlackError("invalid_auth")
