"""Bearer keys and the per-key rate limit.

A key is ``so_`` and 32 random bytes, URL-safe; the store keeps only its
SHA-256. An unknown or revoked key gets 401 ``unauthorized``, the same for
both, so probing tells nothing.

Rate limit: each key may make ``RATE_PER_SECOND`` requests a second on
average, in bursts of up to ``BURST``, per serving process (a token bucket);
past it the answer is 429 ``rate_limited`` with ``Retry-After``. A long-poll
counts once, however long it waits.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from bot.api.errors import ApiError
from store import api_keys
from store.api_records import ApiKey
from store.engine import Database

KEY_PREFIX = "so_"
RATE_PER_SECOND = 20.0
BURST = 100.0


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


async def authenticate(db: Database, request: web.Request) -> ApiKey:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.startswith(KEY_PREFIX) or len(token) > 200:
        raise ApiError(401, "unauthorized", "send `Authorization: Bearer so_...` with a key "
                       "from `signoff api-keys create`")
    key = await api_keys.active_by_hash(db, key_hash(token.strip()))
    if key is None:
        raise ApiError(401, "unauthorized", "this key is unknown or revoked")
    return key


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per key id, in this process."""

    rate: float = RATE_PER_SECOND
    burst: float = BURST
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def take(self, key_id: str) -> None:
        """Spend one token of ``key_id``'s; ApiError 429 when there is none."""
        now = self.clock()
        bucket = self._buckets.setdefault(key_id, _Bucket(self.burst, now))
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens < 1:
            wait = (1 - bucket.tokens) / self.rate
            error = ApiError(429, "rate_limited",
                             f"this key is over {self.rate:g} requests a second "
                             f"(bursts of {self.burst:g}); retry after {max(wait, 0.01):.2f}s")
            error.headers["Retry-After"] = str(max(1, round(wait + 0.5)))
            raise error
        bucket.tokens -= 1
