"""The runtime: what every entry point of ``resume`` needs, in one object."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from resume.app import App
from resume.budget import GrantPolicy
from store.engine import Database

#: How long an approval request stays open. The window bounds how stale an
#: approved artefact can be (prices, credit status, stock move while a card
#: waits); it is not a convenience setting. Raise it only with that in mind.
SUSPENSION_TTL = timedelta(minutes=30)
ORPHAN_AFTER = timedelta(seconds=90)
MAX_RECOVERY_ATTEMPTS = 2
RETENTION = timedelta(days=30)


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
