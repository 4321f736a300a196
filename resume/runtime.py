"""The runtime: what every entry of ``resume`` needs, in one object; and its crash points.

Crash points are for fault-injection tests that kill real processes:
``SIGNOFF_FAULT_AT=<point>`` makes the process SIGKILL itself when it reaches
that point: no cleanup, no finally blocks, exactly like a power cut. Unset (as
in production) a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from resume.apps import App
from resume.budget import GrantPolicy
from store.engine import Database

# The defaults, defined here once; ``bot.config`` reads them for its settings.

#: How long an approval request stays open. The window bounds how stale an
#: approved artefact can be (prices, credit status, stock move while a card
#: waits); it is not a convenience setting. Raise it only with that in mind.
SUSPENSION_TTL_MINUTES = 30
SUSPENSION_TTL = timedelta(minutes=SUSPENSION_TTL_MINUTES)
#: A running run whose heartbeat is older than this is an orphan: its holder died or hangs.
ORPHAN_AFTER_SECONDS = 90
ORPHAN_AFTER = timedelta(seconds=ORPHAN_AFTER_SECONDS)
#: How long an external agent's execution claim holds without a heartbeat or a result;
#: then the call is ``unknown`` (the agent's client heartbeats well within it).
EXECUTION_LEASE_SECONDS = 60
EXECUTION_LEASE = timedelta(seconds=EXECUTION_LEASE_SECONDS)
#: Takeovers of one run before it fails ``recovery_exhausted``.
MAX_RECOVERY_ATTEMPTS = 2
#: How long answered, halted and failed runs are kept before they are purged.
RETENTION_DAYS = 30
RETENTION = timedelta(days=RETENTION_DAYS)

AFTER_LEDGER_STARTED = "after_ledger_started"
AFTER_TOOL_WRITE = "after_tool_write"
AFTER_RESULT_COMMIT = "after_result_commit"
DURING_MODEL_CALL = "during_model_call"
CRASH_POINTS = (AFTER_LEDGER_STARTED, AFTER_TOOL_WRITE, AFTER_RESULT_COMMIT, DURING_MODEL_CALL)


def crash_point(name: str) -> None:
    """Die here, as in a power cut, when ``SIGNOFF_FAULT_AT`` names this point."""
    if os.environ.get("SIGNOFF_FAULT_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_owner_id() -> str:
    """A random id per process; never a host name (containers reuse those)."""
    return f"proc_{secrets.token_hex(8)}"


@dataclass
class Runtime:
    db: Database
    app: App
    owner_id: str = field(default_factory=new_owner_id)
    suspension_ttl: timedelta = SUSPENSION_TTL
    orphan_after: timedelta = ORPHAN_AFTER
    execution_lease: timedelta = EXECUTION_LEASE
    max_recovery_attempts: int = MAX_RECOVERY_ATTEMPTS
    retention: timedelta = RETENTION
    grant: GrantPolicy = field(default_factory=GrantPolicy)
    #: Where approval cards go; None: a DM to the requester.
    approvals_channel: str | None = None
    clock: Callable[[], datetime] = utcnow

    def now(self) -> datetime:
        return self.clock()

    @property
    def heartbeat_every(self) -> float:
        """Seconds between heartbeats: a few per orphan window, so one late beat is harmless."""
        return max(self.orphan_after.total_seconds() / 3, 0.05)
