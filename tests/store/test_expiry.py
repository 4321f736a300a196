"""Expiry of suspensions: the exact boundary, and a click racing the sweep."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from store import claims, events, outbox, runs, sweeps
from store.engine import Database
from store.records import Run
from store.states import RunState
from store.transitions import Effects
from tests.store.factories import make_suspended

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(minutes=30)
EXPIRES = T0 + TTL
TICK = timedelta(microseconds=1)


def _expiry_effects(run: Run) -> Effects:
    return Effects(
        events=[("expired", {"token": run.pending_token})],
        outbox=[("card_update", {"token": run.pending_token, "buttons": False})],
    )


async def _expire(db: Database, now: datetime) -> list[Run]:
    return await sweeps.expire_due(db, now=now, effects_for=_expiry_effects)


async def _claim(db: Database, token: str, now: datetime) -> claims.ClaimWon | claims.ClaimRefused:
    return await claims.claim(
        db, token, decision="approve", actor="U2", reason=None, owner_id="owner-click", now=now,
        fx=Effects(events=[("decision", {"actor": "U2"})]),
    )


async def test_expire_due__expires_at_exactly_now_is_expired(db: Database) -> None:
    run, token = await make_suspended(db, now=T0, ttl=TTL)

    expired = await _expire(db, EXPIRES)

    assert [r.id for r in expired] == [run.id]
    after = await runs.get(db, run.id)
    assert after.state is RunState.halted and after.halt_reason == "suspension_expired"
    assert after.updated_at == EXPIRES
    assert [e.data for e in await events.for_run(db, run.id, kind="expired")] == [
        {"token": token}
    ]
    assert [r.payload for r in await outbox.for_run(db, run.id)][-1] == {
        "token": token, "buttons": False,
    }
    assert await _expire(db, EXPIRES + timedelta(hours=1)) == []


async def test_expire_due__one_tick_before_the_boundary_is_left_alone(db: Database) -> None:
    run, _token = await make_suspended(db, now=T0, ttl=TTL)

    assert await _expire(db, EXPIRES - TICK) == []

    after = await runs.get(db, run.id)
    assert after.state is RunState.suspended and after.updated_at == T0
    assert await events.for_run(db, run.id, kind="expired") == []


async def test_expire_due__only_runs_past_their_own_expiry(db: Database) -> None:
    short, _ = await make_suspended(db, now=T0, ttl=timedelta(minutes=5))
    long, _ = await make_suspended(db, now=T0, ttl=timedelta(minutes=60))

    assert [r.id for r in await _expire(db, T0 + timedelta(minutes=30))] == [short.id]
    assert (await runs.get(db, long.id)).state is RunState.suspended


async def test_claim__at_the_boundary_is_refused_as_expired(db: Database) -> None:
    run, token = await make_suspended(db, now=T0, ttl=TTL)

    refused = await _claim(db, token, EXPIRES)

    assert isinstance(refused, claims.ClaimRefused) and refused.reason == "expired"
    assert (await runs.get(db, run.id)).state is RunState.suspended
    assert isinstance(await _claim(db, token, EXPIRES - TICK), claims.ClaimWon)


async def _race(db: Database, claim_at: datetime, sweep_at: datetime, *, sweep_first: bool) -> str:
    """Race one click against one sweep; check exactly one wins; return the winner."""
    run, token = await make_suspended(db, now=T0, ttl=TTL)
    click, sweep = _claim(db, token, claim_at), _expire(db, sweep_at)

    if sweep_first:
        expired, clicked = await asyncio.gather(sweep, click)
    else:
        clicked, expired = await asyncio.gather(click, sweep)

    swept = [r.id for r in expired]
    after = await runs.get(db, run.id)
    decisions = await events.for_run(db, run.id, kind="decision")
    expiries = await events.for_run(db, run.id, kind="expired")
    card_updates = [r for r in await outbox.for_run(db, run.id) if r.kind == "card_update"]
    if isinstance(clicked, claims.ClaimWon):
        assert swept == [], "both the click and the sweep won"
        assert after.state is RunState.running and after.owner_id == "owner-click"
        assert after.lease_epoch == run.lease_epoch + 1
        assert (len(decisions), len(expiries), len(card_updates)) == (1, 0, 0)
        assert clicked.approval.decided_by == "U2"
        return "claim"
    assert clicked.reason == "expired", clicked
    assert clicked.approval is not None and clicked.approval.decided_by is None
    assert swept == [run.id]
    assert after.state is RunState.halted and after.halt_reason == "suspension_expired"
    assert after.lease_epoch == run.lease_epoch
    assert (len(decisions), len(expiries), len(card_updates)) == (0, 1, 1)
    return "expiry"


@pytest.mark.parametrize(
    ("claim_at", "sweep_at", "expected"),
    [
        (EXPIRES - TICK, EXPIRES - TICK, {"claim"}),
        (EXPIRES, EXPIRES, {"expiry"}),
        (EXPIRES + TICK, EXPIRES + TICK, {"expiry"}),
        # Clocks of two replicas a tick apart: both are entitled; whoever commits first wins.
        (EXPIRES - TICK, EXPIRES, {"claim", "expiry"}),
    ],
    ids=["before", "at", "after", "skewed"],
)
async def test_expire_due__racing_a_claim_has_exactly_one_winner(
    db: Database, claim_at: datetime, sweep_at: datetime, expected: set[str]
) -> None:
    winners = {await _race(db, claim_at, sweep_at, sweep_first=i % 2 == 1) for i in range(16)}

    assert winners <= expected
    if len(expected) == 1:
        assert winners == expected
