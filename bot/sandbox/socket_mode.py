"""Slack's Socket Mode, played locally: ``apps.connections.open`` and the WebSocket behind it.

`FakeSlack` mounts a `SocketModeServer`. A bot calls ``apps.connections.open``
with its app-level token (``xapp-...``) and gets a ``ws://`` URL with a one-use
ticket; on connecting it receives ``hello``. `send` then delivers an envelope
(``envelope_id``, ``type``, ``payload``, ``accepts_response_payload``) over an
open connection and waits for the bot's ack (``{"envelope_id", "payload"}``),
up to Slack's 3 s. `disconnect` sends Slack's ``disconnect`` message (the bot
should reconnect on a new URL); `drop` closes connections outright; the
``drop_*`` switches cut a connection in the middle of one envelope.

Like Slack, nothing is queued for later: an envelope sent while no connection
is open, or whose connection closes before the ack, is not delivered and
`send` raises `NotDelivered` (Slack shows the person an error; they click again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from bot.sandbox import workspace

JSON = dict[str, Any]

__all__ = ["ACK_SECONDS", "APP_LEVEL_METHODS", "LINK_PATH", "Ack", "NotDelivered",
           "SocketModeServer"]

LINK_PATH = "/socket-mode/link"
#: Web API methods called with the app-level token rather than the bot token.
APP_LEVEL_METHODS = frozenset({"apps.connections.open"})
APP_ID = "A0SIGNOFF"
#: Slack waits this long for an ack, then tells the person the app did not respond.
ACK_SECONDS = 3.0
#: How long `connected` waits for the bot to (re)connect before failing loudly.
CONNECT_WAIT_SECONDS = 15.0


class NotDelivered(Exception):
    """The envelope never reached a bot that acked it; the message says why."""


@dataclass(frozen=True, slots=True)
class Ack:
    envelope_id: str
    type: str
    payload: JSON
    #: Arrived after `send` had given up on it (the person already saw an error).
    late: bool = False


@dataclass(slots=True)
class _InFlight:
    type: str
    socket: web.WebSocketResponse
    answer: asyncio.Future[JSON]


class SocketModeServer:
    """The Socket Mode side of the stand-in, mounted on ``app`` (FakeSlack's application)."""

    def __init__(self, app: web.Application, base_url: Callable[[], str]) -> None:
        self._base_url = base_url
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._in_flight: dict[str, _InFlight] = {}
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._turn = itertools.count()
        #: Connections accepted so far (each got its ``hello``).
        self.connections = 0
        #: Every ack received, in arrival order.
        self.acks: list[Ack] = []
        #: Close the connection right after the next N envelopes are acked.
        self.drop_after_ack = 0
        #: Close the connection right after sending the next N envelopes, before their ack.
        self.drop_before_ack = 0
        #: False: ``apps.connections.open`` fails, so a dropped bot cannot reconnect (yet).
        self.accepting = True
        app.router.add_get(LINK_PATH, self._link)
        app.on_shutdown.append(self._shutdown)

    # -- Web API -------------------------------------------------------------

    def open_connection(self, args: JSON) -> JSON:
        """``apps.connections.open``: a WebSocket URL with a ticket good for one connection."""
        if not self.accepting:
            raise workspace.SlackError("service_unavailable")
        ticket = secrets.token_urlsafe(12)
        self._tickets.add(ticket)
        ws_base = self._base_url().replace("http://", "ws://", 1)
        return {"url": f"{ws_base}{LINK_PATH}?ticket={ticket}"}

    # -- what tests and the sandbox page do ----------------------------------

    @property
    def open_connections(self) -> int:
        return sum(1 for ws in self._sockets if not ws.closed)

    async def connected(self, *, more_than: int = 0) -> None:
        """Wait until a connection numbered above ``more_than`` is open (e.g. a reconnect)."""
        async with asyncio.timeout(CONNECT_WAIT_SECONDS), self._changed:
            await self._changed.wait_for(
                lambda: self.connections > more_than and self.open_connections > 0)

    async def send(self, type_: str, payload: JSON) -> JSON:
        """Deliver one envelope and return the ack's payload ({} for an empty ack)."""
        sockets = [ws for ws in self._sockets if not ws.closed]
        if not sockets:
            raise NotDelivered("no Socket Mode connection is open: Slack could not deliver it")
        ws = sockets[next(self._turn) % len(sockets)]
        envelope_id = f"env-{next(self._ids):06d}"
        flight = _InFlight(type_, ws, asyncio.get_running_loop().create_future())
        self._in_flight[envelope_id] = flight
        try:
            await ws.send_json({
                "envelope_id": envelope_id, "type": type_, "payload": payload,
                "accepts_response_payload": type_ != "events_api",
                "retry_attempt": 0, "retry_reason": "",
            })
            if self.drop_before_ack > 0:
                self.drop_before_ack -= 1
                await ws.close()
            async with asyncio.timeout(ACK_SECONDS):
                answer = await flight.answer
        except TimeoutError:
            raise NotDelivered(f"no ack within {ACK_SECONDS:g} s") from None
        except ConnectionError as exc:
            raise NotDelivered(f"the connection failed: {exc}") from None
        finally:
            self._in_flight.pop(envelope_id, None)
        if self.drop_after_ack > 0:
            self.drop_after_ack -= 1
            await ws.close()
        return answer

    async def deliver_form(self, body: str) -> JSON:
        """A signed-HTTP-style form body (as the sandbox page builds it) as an envelope.

        ``payload=<JSON>`` is interactivity; plain fields are a slash command. The
        answer has the shape of an HTTP delivery's: ``status`` and the ack's ``body``.
        """
        fields = dict(parse_qsl(body, keep_blank_values=True))
        if "payload" in fields:
            type_, payload = "interactive", json.loads(fields["payload"])
        else:
            type_, payload = "slash_commands", fields
        try:
            answer = await self.send(type_, payload)
        except NotDelivered as exc:
            return {"status": 503, "body": {"ok": False, "error": str(exc)}}
        return {"status": 200, "body": answer} if answer else {"status": 200}

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's ``disconnect`` message on every connection: the bot should reconnect."""
        for ws in [ws for ws in self._sockets if not ws.closed]:
            await ws.send_json({"type": "disconnect", "reason": reason,
                                "debug_info": {"host": "sandbox-socket-mode"}})

    async def drop(self) -> None:
        """Close every connection from this side, as a restarting Slack edge would."""
        for ws in list(self._sockets):
            await ws.close()

    # -- the WebSocket -------------------------------------------------------

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.json_response({"ok": False, "error": "invalid_ticket"}, status=401)
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        await ws.send_json({"type": "hello", "num_connections": self.open_connections + 1,
                            "debug_info": {"host": "sandbox-socket-mode"},
                            "connection_info": {"app_id": APP_ID}})
        async with self._changed:
            self._sockets.append(ws)
            self._changed.notify_all()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._received(message.data)
        finally:
            await self._closed(ws)
        return ws

    def _received(self, data: str) -> None:
        with contextlib.suppress(ValueError):
            message = json.loads(data)
            if not isinstance(message, dict) or "envelope_id" not in message:
                return
            envelope_id = str(message["envelope_id"])
            payload = message.get("payload") if isinstance(message.get("payload"), dict) else {}
            flight = self._in_flight.get(envelope_id)
            late = flight is None or flight.answer.done()
            self.acks.append(Ack(envelope_id, flight.type if flight else "", payload or {}, late))
            if flight is not None and not flight.answer.done():
                flight.answer.set_result(payload or {})

    async def _closed(self, ws: web.WebSocketResponse) -> None:
        async with self._changed:
            if ws in self._sockets:
                self._sockets.remove(ws)
            self._changed.notify_all()
        for flight in self._in_flight.values():
            if flight.socket is ws and not flight.answer.done():
                flight.answer.set_exception(
                    NotDelivered("the connection closed before the ack"))

    async def _shutdown(self, app: web.Application) -> None:
        await self.drop()
