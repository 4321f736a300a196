"""Every Prometheus metric signoff exports, and the functions that count into them.

The metric objects live here and nowhere else. They are counted at the bot
layer from what the entries in `resume/` return (a click's outcome, a reaper
pass's report, an expiry pass's runs, an outbox pass's report); `resume/` and
`store/` know nothing of Prometheus and never call back into here.

Counters and histograms are per process, in prometheus_client's default
registry: sum them across replicas. The gauges read from the store are
cluster-wide: every replica reports the same value, so aggregate them with
``max``, not ``sum``.

``GET /metrics`` (:func:`install`) serves Prometheus's text format, guarded. Who
may scrape: with ``SIGNOFF_METRICS_TOKEN`` set, a request carrying
``Authorization: Bearer <token>`` (from anywhere); without it, only a peer on
the loopback interface. Everyone else gets 401 or 403 and no numbers: the
counts say how busy the approvals are and who is waiting. The store's gauges
are refreshed by a scrape when the last reading is older than
``STORE_MAX_AGE_SECONDS``, so a fleet of scrapers costs the database one read
transaction (five counts) per interval.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import SecretStr

from resume import outcomes
from resume.outcomes import RecoveryReport
from resume.runtime import Runtime
from store import errors, stats
from store.stats import Snapshot

log = logging.getLogger(__name__)

#: The store's counts are at most this old when served.
STORE_MAX_AGE_SECONDS = 5.0

# --- Read from the store when scraped (cached; see StoreReadings) ----------------------

RUNS = Gauge("signoff_runs", "Runs in the database per state.", ["state"])
OUTBOX_PENDING = Gauge("signoff_outbox_pending",
                       "Slack posts and updates in the outbox not yet delivered.")
ORPHANS = Gauge("signoff_orphans", "Running runs whose heartbeat is older than "
                "SIGNOFF_ORPHAN_AFTER_SECONDS, not yet taken over by a reaper.")
WAITING_LONG = Gauge("signoff_approvals_waiting_long", "Suspended runs that have waited more "
                     "than half of SIGNOFF_SUSPENSION_TTL_MINUTES for a decision.")
TOOL_CALLS = Counter(
    "signoff_tool_calls", "Tool calls settled in the ledger, per tool and status "
    "(succeeded, failed, unknown); read from the database.", ["tool", "status"])

# --- Counted by this process ------------------------------------------------------------

DECISIONS = Counter("signoff_decisions", "Clicks and submissions that decided a pending "
                    "request (the one winning click per request).", ["decision"])
REFUSALS = Counter("signoff_refusals", "Decisions refused, changing nothing, per reason.",
                   ["reason"])
APPROVAL_WAIT = Histogram(
    "signoff_approval_wait_seconds", "From a run suspending on a request to its decision.",
    buckets=(5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200))
CLICK_ACK = Histogram(
    "signoff_click_ack_seconds", "From a click or submission reaching this process to its "
    "ack, per transport (http, socket_mode); refused requests are not counted.", ["transport"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5))
OUTBOX_DEAD = Counter("signoff_outbox_dead", "Outbox rows this process gave up on after "
                      "SIGNOFF_OUTBOX_MAX_ATTEMPTS (see `signoff runs show`).")
RECOVERIES = Counter("signoff_recoveries", "Orphaned runs this process's reaper handled, per "
                     "outcome (recovered, exhausted, interrupted).", ["outcome"])
EXPIRED = Counter("signoff_expired", "Suspensions this process expired (suspension_expired).")
API_REQUESTS = Counter("signoff_api_requests", "Requests to the HTTP API this process "
                       "answered, per route (method and path template) and HTTP status.",
                       ["route", "status"])

TRANSPORTS = ("http", "socket_mode")
DECISION_KINDS = ("approve", "decline")
RECOVERY_OUTCOMES = ("recovered", "exhausted", "interrupted")

# Every labelled series exists from the start (at 0), so a rate() has a baseline.
for _transport in TRANSPORTS:
    CLICK_ACK.labels(transport=_transport)
for _decision in DECISION_KINDS:
    DECISIONS.labels(decision=_decision)
for _outcome in RECOVERY_OUTCOMES:
    RECOVERIES.labels(outcome=_outcome)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def refusal_reason(refused: outcomes.Refusal) -> str:
    """A short label: ``expired``, ``unknown``, ``superseded``, ``closed``, ``not_an_approver``,
    ``already_resumed``."""
    if isinstance(refused, outcomes.UnknownOrExpired):
        return str(refused.reason.value)
    return _snake(type(refused).__name__)


def decided(outcome: outcomes.Claimed | outcomes.Refusal) -> None:
    """A click or submission's outcome: a decision, or a refusal and its reason."""
    if isinstance(outcome, outcomes.Claimed):
        DECISIONS.labels(decision=outcome.decision).inc()
    else:
        REFUSALS.labels(reason=refusal_reason(outcome)).inc()


def waited(claimed: outcomes.Claimed) -> None:
    """How long the claimed request waited for its decision (the entry says)."""
    APPROVAL_WAIT.observe(max(0.0, claimed.waited.total_seconds()))


def api_request(route: str, status: int) -> None:
    API_REQUESTS.labels(route=route, status=str(status)).inc()


def acked(transport: str, seconds: float) -> None:
    CLICK_ACK.labels(transport=transport).observe(seconds)


def recovered(report: RecoveryReport) -> None:
    RECOVERIES.labels(outcome="recovered").inc(len(report.recovered))
    RECOVERIES.labels(outcome="exhausted").inc(len(report.exhausted))
    RECOVERIES.labels(outcome="interrupted").inc(len(report.interrupted))


def expired(runs: Sequence[object]) -> None:
    EXPIRED.inc(len(runs))


def dead_letters(count: int) -> None:
    OUTBOX_DEAD.inc(count)


def job_done(name: str, result: object) -> None:
    """Count what a scheduled job's pass did (the scheduler calls this after each pass)."""
    if name == "reap" and isinstance(result, RecoveryReport):
        recovered(result)
    elif name == "expire" and isinstance(result, list):
        expired(result)


def from_store(snap: Snapshot, seen: dict[tuple[str, str], int]) -> None:
    """Set the store-derived series from one snapshot of the database.

    ``seen`` holds the ledger counts of the previous snapshot of the same database
    (updated here), so the tool-call counter grows by what is new.
    """
    for state, n in snap.runs.items():
        RUNS.labels(state=state).set(n)
    OUTBOX_PENDING.set(snap.outbox.get("pending", 0))
    ORPHANS.set(snap.orphans)
    WAITING_LONG.set(snap.waiting_long)
    for (tool, status), n in snap.tool_calls.items():
        # A Counter only goes up: add what is new since the last snapshot (the purge
        # deleting old rows makes the count drop; that is not a decrease in calls made).
        grown = n - seen.get((tool, status), 0)
        if grown > 0:
            TOOL_CALLS.labels(tool=tool, status=status).inc(grown)
        seen[(tool, status)] = n


# --- Served on GET /metrics -------------------------------------------------------------

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
                from_store(await self._snapshot(), self._ledger_seen)
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
