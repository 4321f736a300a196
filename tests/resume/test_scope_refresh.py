"""The scope stored on a run is the one resolved at its latest resume, not at its start.

Every resume re-resolves the requester's scope and stores it on the run with
the time it was resolved: what a person reading the run (or an audit) sees is
what the run acted under, and a permission revoked while it waited shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from resume import outcomes
from resume.outcomes import Decision
from store import events, runs
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world

WAITED = timedelta(minutes=7)


@dataclass
class Clock:
    at: datetime

    def __call__(self) -> datetime:
        return self.at


@pytest.mark.parametrize("decision", ["approve", "decline"])
async def test_scope__revoked_while_suspended_is_what_the_resumed_run_stores(
    db: Database, decision: Decision,
) -> None:
    clock = Clock(datetime.now(UTC).replace(microsecond=0))
    world = await quotes_world(db, clock=clock)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended
    before = await runs.get(db, run.id)
    assert "send_quote" in before.scope_snapshot["tools"]
    assert before.scope_resolved_at == clock.at

    await world.crm.set_can_send("U_REP", False)
    clock.at += WAITED
    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", decision, "U_REP")

    if decision == "approve":
        assert isinstance(result, outcomes.NoLongerPermitted)
    else:
        assert isinstance(result, outcomes.Declined)
    after = await runs.get(db, run.id)
    assert after.state is not RunState.running
    assert after.scope_snapshot["user_id"] == "U_REP"
    assert after.scope_snapshot["tools"] == ["lookup_account", "draft_quote"]
    assert after.scope_resolved_at == clock.at
    assert before.scope_resolved_at is not None and after.scope_resolved_at is not None
    assert after.scope_resolved_at > before.scope_resolved_at
    resolved = await events.for_run(db, run.id, kind="scope_resolved")
    assert [e.data["tools"] for e in resolved] == [
        ["lookup_account", "draft_quote", "send_quote"], ["lookup_account", "draft_quote"]]
    assert resolved[-1].at == clock.at
    assert await world.crm.sent_count() == 0
