"""What a failed Slack call means for an outbox row: retry later, or give up now.

Slack answers in three ways that matter to the outbox:

- *Rate limited* (HTTP 429, ``Retry-After``): Slack says when to come back;
  the row waits at least that long. This only reaches the outbox after the
  client's own rate-limit retry handler has given up.
- *Transient* (HTTP 5xx, a connection error, a timeout): nobody says when;
  the row backs off exponentially with jitter.
- *Permanent* (``channel_not_found``, ``invalid_blocks``, ...): sending the
  same request again cannot succeed; the row is dead at once and logged.

``rate_limited`` and ``transient`` failures mean Slack (or the way to it) is
unwell, so a delivery pass stops there instead of hammering it row by row.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

#: Slack error codes that no retry can fix: the request, the target or the credentials are wrong.
PERMANENT_ERRORS = frozenset({
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "invalid_blocks",
    "invalid_blocks_format",
    "invalid_arguments",
    "msg_too_long",
    "msg_blocks_too_long",
    "no_text",
    "message_not_found",
    "cant_update_message",
    "edit_window_closed",
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "missing_scope",
    "no_permission",
    "restricted_action",
    "user_not_found",
    "users_not_found",
    "cannot_dm_bot",
})
#: Longest wait between two attempts of one row.
MAX_BACKOFF_SECONDS = 300.0
#: Used when a 429 carries no (readable) Retry-After header.
DEFAULT_RETRY_AFTER_SECONDS = 30.0

Kind = Literal["rate_limited", "transient", "permanent"]


@dataclass(frozen=True)
class Failure:
    """A classified delivery failure."""

    kind: Kind
    #: Short, stable text for ``outbox.last_error`` (Slack's code, the HTTP status, the exception).
    error: str
    #: Seconds Slack asked us to wait (rate_limited only).
    retry_after: float | None = None

    @property
    def slack_unwell(self) -> bool:
        """True when the rest of this pass would most likely fail the same way."""
        return self.kind != "permanent"


def classify(exc: SlackClientError | aiohttp.ClientError | TimeoutError) -> Failure:
    """Classify an exception raised by an ``AsyncWebClient`` call."""
    if not isinstance(exc, SlackApiError):
        # aiohttp.ClientError, TimeoutError, and slack_sdk's own transport errors.
        return Failure("transient", f"{type(exc).__name__}: {exc}"[:500])
    status = int(getattr(exc.response, "status_code", 0) or 0)
    code = _error_code(exc)
    if status == 429 or code == "ratelimited":
        return Failure("rate_limited", f"429 {code}", retry_after=_retry_after(exc))
    if status >= 500:
        return Failure("transient", f"{status} {code}")
    if code in PERMANENT_ERRORS:
        return Failure("permanent", code)
    # An error code we do not know: assume it may pass, and let max_attempts bound it.
    return Failure("transient", f"{status} {code}")


def backoff(attempts: int, *, rand: Callable[[], float] = random.random) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones.

    ``2**attempts`` capped at five minutes, with "equal jitter": between half
    and all of it, so replicas that failed together do not retry together.
    """
    base = min(2.0 ** max(attempts, 0), MAX_BACKOFF_SECONDS)
    return base / 2 + rand() * base / 2


def _error_code(exc: SlackApiError) -> str:
    data: Any = getattr(exc.response, "data", None)
    if isinstance(data, Mapping):
        code = data.get("error")
        if isinstance(code, str) and code:
            return code
    return "unknown_error"


def _retry_after(exc: SlackApiError) -> float:
    headers: Any = getattr(exc.response, "headers", None) or {}
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if str(name).lower() == "retry-after":
                raw = value[0] if isinstance(value, list | tuple) and value else value
                try:
                    seconds = float(str(raw))
                except ValueError:
                    break
                if math.isfinite(seconds) and seconds >= 0:
                    return max(seconds, 1.0)
    return DEFAULT_RETRY_AFTER_SECONDS
