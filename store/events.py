"""The trace: what happened to a run, for people and for audit."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import select

from store import schema
from store.engine import Database
from store.records import Event


class EventKind(StrEnum):
    #: The run was created (who asked, which app, its limits).
    started = "started"
    #: The router's choice, keyed by router, with the route table's digest.
    route = "route"
    #: The router chose no route.
    no_route = "no_route"
    #: The requester's scope as re-resolved at the start of a drive.
    scope_resolved = "scope_resolved"
    #: An older snapshot was migrated to the current version.
    snapshot_migrated = "snapshot_migrated"
    #: The app's fingerprint differs from the one the run was written under.
    app_changed = "app_changed"
    #: One model step (its tool calls and cost).
    step = "step"
    #: The run suspended on a pending request.
    suspended = "suspended"
    #: A claimed run suspended again: the preview changed while it waited.
    resuspended = "resuspended"
    #: A person approved or declined (who, what digest they saw).
    decision = "decision"
    #: A declined call's result was given to the model.
    declined = "declined"
    #: An approved call's guard failed when re-checked.
    guard_failed = "guard_failed"
    #: A tool ran (its ledger status).
    tool = "tool"
    #: A call was refused to the model (unknown tool, bad arguments, not permitted).
    tool_refused = "tool_refused"
    #: A settled call's result was restored from the ledger, not run again.
    replayed_from_ledger = "replayed_from_ledger"
    #: An earlier attempt's unknown outcome was asked about.
    reconciled = "reconciled"
    #: The run halted.
    halted = "halted"
    #: The run failed.
    failed = "failed"
    #: The run answered.
    answered = "answered"
    #: A person continued a halted run with more budget.
    grant = "grant"
    #: The requester cancelled the run.
    cancelled = "cancelled"
    #: A pending request expired.
    expired = "expired"
    #: A reaper took the orphaned run over.
    recovered = "recovered"
    #: An external run was created through the API (which key, the requester, limits).
    started_external = "started_external"
    #: An external call's execution was claimed (its ledger row is ``started``).
    executing = "executing"
    #: An external call's execution lease ran out with no result: its outcome is unknown.
    lease_lost = "lease_lost"


async def for_run(db: Database, run_id: str, *, kind: str | None = None) -> list[Event]:
    """The run's events in order, optionally only those of one kind."""
    EVENTS = schema.run_events
    stmt = select(EVENTS).where(EVENTS.c.run_id == run_id).order_by(EVENTS.c.seq)
    if kind is not None:
        stmt = stmt.where(EVENTS.c.kind == kind)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [Event.from_row(r) for r in rows]
