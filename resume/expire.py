"""Expire: the clock halts a suspension that nobody decided on within its window.

The window (``rt.suspension_ttl``, 30 minutes by default) bounds how stale an
approved artefact can be; see ``resume.runtime.SUSPENSION_TTL``.

``expire_suspended`` moves every suspended run whose ``expires_at`` is at or
before ``now`` to ``halted`` (``suspension_expired``); in the same transaction
its approval card loses its buttons and the requester is told. A click racing
the sweep has one of two outcomes: it claimed first (the run is running, the
sweep skips it) or it is refused as expired; never both.
"""

from __future__ import annotations

import logging
from datetime import datetime

from resume import call_decided, outbox
from resume.runtime import Runtime
from store import sweeps
from store.events import EventKind
from store.reasons import HaltReason
from store.records import Run
from store.transitions import Effects

log = logging.getLogger(__name__)

async def expire_suspended(rt: Runtime, now: datetime | None = None, *,
                           limit: int = 100) -> list[Run]:
    """Halt up to ``limit`` suspensions due at ``now``; the runs as halted."""
    now = now or rt.now()
    expired = await sweeps.expire_due(rt.db, now=now, limit=limit,
                                      effects_for=lambda run: _effects(rt, run, now))
    for run in expired:
        log.info("run %s: approval request expired", run.id,
                 extra={"action": "expire", "run_id": run.id})
    return expired


def _effects(rt: Runtime, before: Run, now: datetime) -> Effects:
    tool = str((before.pending or {}).get("tool", "the pending request"))
    expires = before.expires_at.isoformat() if before.expires_at else None
    detail = (f"nobody approved or declined {tool} before {expires}; the request expired. "
              f"Continue the run with `/signoff continue {before.id}` to be asked again.")
    rows = []
    if before.pending_token is not None:
        rows.append(outbox.card_update(before, before.pending_token, "expired", at=now))
    rows.append(outbox.notice(before, "expired", channel=rt.approvals_channel,
                              reason=HaltReason.suspension_expired, detail=detail))
    return call_decided.merged(Effects(
        events=[(EventKind.expired, {"token": before.pending_token, "tool": tool,
                             "expires_at": expires})],
        outbox=rows,
    ), call_decided.expiry_effects(before, now))
