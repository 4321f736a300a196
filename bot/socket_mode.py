"""Socket Mode: Slack's events, clicks and commands over a WebSocket this process opens.

Bolt's ``AsyncSocketModeHandler`` (aiohttp) drives the same ``AsyncApp`` the
HTTP route does, so listeners, acks and verification of what a listener may
do are identical. The WebSocket URL comes from ``apps.connections.open`` on
``SLACK_API_URL`` (called with the app-level token). Each replica holds its
own connection; Slack spreads envelopes across them.

An envelope is acked when the listener calls ``ack()``, and the listener then
carries on in this process whatever happens to the socket: a connection
dropped right after an ack loses nothing. What it does next is durable: a
click's claim commits in one transaction, and the resumed run is in the store
under a lease the reaper watches. A process that dies between an ack and the
claim leaves the card as it was, buttons and all: nothing is half-done, and
the person clicks again.
A dropped socket is reopened by the SDK client at once when Slack
closes it, and within ``PING_INTERVAL_SECONDS`` when the connection just dies.
"""

from __future__ import annotations

import logging
import time

import aiohttp
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import (
    run_async_bolt_app,
    send_async_response,
)
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from bot import metrics

log = logging.getLogger(__name__)

#: Seconds between pings; a connection silent for four of them is replaced.
PING_INTERVAL_SECONDS = 5.0
#: Envelope types that are a person's click or submission (timed as click acks).
_INTERACTIVE = "interactive"


class ConnectionRefused(Exception):
    """``apps.connections.open`` refused the app token or could not be reached."""


class TimedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's handler, timing each click from its envelope's arrival to its ack."""

    async def handle(  # type: ignore[override]
        self, client: SocketModeClient, req: SocketModeRequest
    ) -> None:
        start = time.perf_counter()
        response = await run_async_bolt_app(self.app, req)
        await send_async_response(client, req, response, start)
        if req.type == _INTERACTIVE and response.status == 200:  # acked, not refused
            metrics.acked("socket_mode", time.perf_counter() - start)

    async def open(self) -> None:
        await self.connect_async()  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        """Close the connection and the SDK client's HTTP session."""
        await self.close_async()  # type: ignore[no-untyped-call]


async def connect(app: AsyncApp, app_token: str) -> TimedSocketModeHandler:
    """Open the first connection, or raise `ConnectionRefused` saying why.

    The first URL is asked for here, not in the SDK's connect loop, which would
    retry a revoked token forever instead of stopping the process at start.
    """
    handler = TimedSocketModeHandler(app, app_token=app_token,
                                     ping_interval=PING_INTERVAL_SECONDS)
    try:
        handler.client.wss_uri = await handler.client.issue_new_wss_url()
    except SlackApiError as exc:
        await handler.close()
        raise ConnectionRefused(
            f"apps.connections.open refused SLACK_APP_TOKEN: {exc.response.get('error')}; "
            "check the app-level token (scope connections:write) and that Socket Mode is "
            "enabled for the app") from exc
    except (aiohttp.ClientError, OSError) as exc:
        await handler.close()
        raise ConnectionRefused(f"apps.connections.open could not be reached at "
                                f"{app.client.base_url}: {exc}") from exc
    await handler.open()
    log.info("Socket Mode connected", extra={"action": "socket_mode_connected"})
    return handler


async def connected(handler: TimedSocketModeHandler) -> bool:
    """Whether the handler holds an open connection now (for /readyz)."""
    sdk = handler.client
    return bool(await sdk.is_connected())
