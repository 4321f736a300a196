"""``GET /metrics``: Prometheus's text format, guarded, with the store's gauges fresh.

Who may scrape: with ``SIGNOFF_METRICS_TOKEN`` set, a request carrying
``Authorization: Bearer <token>`` (from anywhere); without it, only a peer on
the loopback interface. Everyone else gets 401 or 403 and no numbers: the
counts say how busy the approvals are and who is waiting.

The gauges read from the store (`bot.metrics.from_store`) are refreshed by a
scrape when the last reading is older than ``STORE_MAX_AGE_SECONDS``, so a
fleet of scrapers costs the database one read transaction (five counts) per interval.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import SecretStr

from bot import metrics
from resume.runtime import Runtime
from store import errors, stats

log = logging.getLogger(__name__)

#: The store's counts are at most this old when served.
STORE_MAX_AGE_SECONDS = 5.0


class StoreReadings:
    """The last store snapshot's age, per server; one refresh at a time."""

    def __init__(self, rt: Runtime, max_age: float | None = None) -> None:
        self.rt = rt
        self.max_age = STORE_MAX_AGE_SECONDS if max_age is None else max_age
        self._read_at: float | None = None
        self._ledger_seen: dict[tuple[str, str], int] = {}
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:
            now = time.monotonic()
            if self._read_at is not None and now - self._read_at < self.max_age:
                return
            try:
                metrics.from_store(await self._snapshot(), self._ledger_seen)
            except errors.DatabaseUnavailable as exc:
                # Serve the process's own counters; the store's gauges keep their last value.
                log.warning("metrics: store counts unavailable: %s", exc,
                            extra={"action": "metrics_store_unavailable"})
                return
            self._read_at = now


    async def _snapshot(self) -> stats.Snapshot:
        rt, now = self.rt, self.rt.now()
        return await stats.snapshot(rt.db, stale_before=now - rt.orphan_after,
                                    expires_before=now + rt.suspension_ttl / 2)


READINGS: web.AppKey[StoreReadings] = web.AppKey("signoff.metrics_readings", StoreReadings)


def _loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False


def _refusal(request: web.Request, token: SecretStr | None) -> web.Response | None:
    if token is None:
        if _loopback(request.remote):
            return None
        return web.json_response({"ok": False, "error": "metrics are served to the loopback "
                                  "interface only; set SIGNOFF_METRICS_TOKEN"}, status=403)
    header = request.headers.get("Authorization", "")
    given = header.removeprefix("Bearer ").encode() if header.startswith("Bearer ") else b""
    if hmac.compare_digest(given, token.get_secret_value().encode()):
        return None
    return web.json_response({"ok": False, "error": "a bearer token is required"}, status=401,
                             headers={"WWW-Authenticate": "Bearer"})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def ack_timer(events_path: str) -> Any:
    """Middleware: time each click on ``events_path`` from arrival to the HTTP answer (the ack:
    Bolt answers when the listener acks)."""

    @web.middleware
    async def timed(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != events_path or request.method != "POST":
            return await handler(request)
        start = time.perf_counter()
        response = await handler(request)
        # Interactivity (clicks, submissions) arrives as `payload=<JSON>`; commands do not.
        if (await request.read()).startswith(b"payload="):
            metrics.acked("http", time.perf_counter() - start)
        return response

    return timed


def install(web_app: web.Application, path: str, rt: Runtime, token: SecretStr | None) -> None:
    """Serve ``GET path`` on ``web_app``: the default registry, store gauges refreshed."""
    readings = web_app[READINGS] = StoreReadings(rt)

    async def scrape(request: web.Request) -> web.Response:
        refused = _refusal(request, token)
        if refused is not None:
            return refused
        await readings.refresh()
        return web.Response(body=generate_latest(REGISTRY),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    web_app.router.add_get(path, scrape)
