from __future__ import annotations

import asyncio
from datetime import timedelta

from store import claims, events, runs
from store.engine import Database
from store.reasons import RefusalReason
from store.states import RunState
from store.transitions import Effects
from tests.store.factories import make_run, make_suspended, utcnow


async def _claim(db: Database, token: str, actor: str) -> claims.ClaimWon | claims.ClaimRefused:
    return await claims.claim(
        db, token, decision="approve", actor=actor, reason=None, owner_id=f"owner-{actor}",
        now=utcnow(), fx=Effects(events=[("decision", {"actor": actor})]),
    )


async def test_claim__fifty_concurrent_claims_have_one_winner(db: Database) -> None:
    for _ in range(20):
        run, token = await make_suspended(db)
        results = await asyncio.gather(*(_claim(db, token, f"U{i}") for i in range(50)))
        winners = [r for r in results if isinstance(r, claims.ClaimWon)]
        assert len(winners) == 1
        losers = [r for r in results if isinstance(r, claims.ClaimRefused)]
        assert {r.reason for r in losers} == {"already_decided"}
        assert all(r.approval and r.approval.decided_by == winners[0].approval.decided_by
                   for r in losers)
        after = await runs.get(db, run.id)
        assert after.state is RunState.running
        assert after.lease_epoch == run.lease_epoch + 1
        assert len(await events.for_run(db, run.id, kind="decision")) == 1


async def test_claim__wrong_token_is_refused_and_changes_nothing(db: Database) -> None:
    run, _token = await make_suspended(db)
    result = await _claim(db, "not-a-token", "U1")
    assert isinstance(result, claims.ClaimRefused) and result.reason is RefusalReason.unknown
    after = await runs.get(db, run.id)
    assert after.state is RunState.suspended and after.lease_epoch == run.lease_epoch


async def test_claim__expired_suspension_is_refused(db: Database) -> None:
    run, token = await make_suspended(db, now=utcnow() - timedelta(hours=1))
    result = await _claim(db, token, "U1")
    assert isinstance(result, claims.ClaimRefused) and result.reason == "expired"
    assert (await runs.get(db, run.id)).state is RunState.suspended


async def test_claim__non_suspended_run_is_refused(db: Database) -> None:
    run, token = await make_suspended(db)
    assert isinstance(await _claim(db, token, "U1"), claims.ClaimWon)
    # the claimed run finishes; a late click must not revive it
    current = await runs.get(db, run.id)
    await runs.finish(db, run.id, current.lease_epoch, "done", now=utcnow(), fx=Effects())
    late = await _claim(db, token, "U2")
    assert isinstance(late, claims.ClaimRefused) and late.reason == "already_decided"
    assert (await runs.get(db, run.id)).state is RunState.answered


async def test_continue__only_owner_and_only_halted(db: Database) -> None:
    run = await make_run(db, user_id="U1")
    limits = {**run.limits, "max_steps": 14}
    assert await claims.continue_halted(
        db, run.id, user_id="U1", owner_id="o", limits=limits, now=utcnow(), fx=Effects()
    ) == "not_halted"
    await runs.halt(db, run.id, run.lease_epoch, "budget:steps", now=utcnow(), fx=Effects())
    assert await claims.continue_halted(
        db, run.id, user_id="U2", owner_id="o", limits=limits, now=utcnow(), fx=Effects()
    ) == "not_found"
    assert await claims.continue_halted(
        db, "run_missing", user_id="U1", owner_id="o", limits=limits, now=utcnow(), fx=Effects()
    ) == "not_found"
    resumed = await claims.continue_halted(
        db, run.id, user_id="U1", owner_id="o", limits=limits, now=utcnow(), fx=Effects()
    )
    assert not isinstance(resumed, str)
    assert resumed.state is RunState.running and resumed.limits["max_steps"] == 14
    assert resumed.halt_reason is None
