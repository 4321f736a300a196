"""HTTP to signoff: the bearer key, JSON, error bodies, and reconnecting with backoff.

Every request the client makes is safe to repeat: runs are keyed by ``idempotency_key``,
calls by ``call_id``, and the execution claim has exactly one winner, so a request whose
answer was lost is simply sent again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import httpx

from signoff_client.errors import ApiError, Unavailable

log = logging.getLogger("signoff_client")

#: The longest the server holds a long-poll open (seconds).
MAX_WAIT = 30


class Backoff:
    """Exponential delays with full jitter, reset once a request gets through."""

    def __init__(self, first: float = 0.2, cap: float = 5.0) -> None:
        self.first, self.cap, self.attempt = first, cap, 0

    def next_delay(self) -> float:
        self.attempt += 1
        return random.uniform(0, min(self.cap, self.first * 2 ** self.attempt))


class Api:
    """One API key's view of a signoff server."""

    def __init__(self, url: str, api_key: str, *, give_up_after: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.give_up_after = give_up_after
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx.Timeout(15.0, read=MAX_WAIT + 15.0),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, *, json: Any = None,
                      params: dict[str, Any] | None = None) -> tuple[int, Any]:
        """Send until the server answers; 4xx raises ApiError, success returns (status, body).

        Connection failures, 5xx and 429 are retried with backoff (429 honours Retry-After)
        for up to ``give_up_after`` seconds, then raise Unavailable.
        """
        backoff = Backoff()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.give_up_after
        while True:
            try:
                response = await self._http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                problem, delay = f"{type(exc).__name__}: {exc}", backoff.next_delay()
            else:
                if response.status_code < 400:
                    return response.status_code, _body(response)
                if response.status_code != 429 and response.status_code < 500:
                    raise _api_error(response)
                problem = f"HTTP {response.status_code}"
                delay = _retry_after(response) or backoff.next_delay()
            if loop.time() + delay > deadline:
                raise Unavailable(f"{method} {path}: signoff unreachable for "
                                  f"{self.give_up_after:.0f}s ({problem})")
            log.info("signoff request retried", extra={"action": "retry", "path": path,
                                                       "problem": problem})
            await asyncio.sleep(delay)


def _body(response: httpx.Response) -> Any:
    return response.json() if response.content else None


def _api_error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    code = str(body.get("error") or f"http_{response.status_code}")
    message = str(body.get("message") or response.reason_phrase)
    return ApiError(response.status_code, code, message, body)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
