"""Expiry of suspensions (the exact boundary, a click racing the sweep) and retention."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from resume import decide, expire, outcomes, proceed, purge
from store import events, outbox, runs
from store.engine import Database
from store.reasons import RefusalReason
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, QuotesWorld, quotes_world

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)


class Clock:
    """The runtime's clock, set by the test: time moves by assignment, never by sleeping."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


async def _world(db: Database, clock: Clock) -> QuotesWorld:
    return await quotes_world(db, clock=clock)


async def test_expire_suspended__at_exactly_expires_at_halts_and_strips_the_card(
    db: Database,
) -> None:
    clock = Clock(T0)
    world = await _world(db, clock)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended and run.pending_token
    expires = T0 + world.rt.suspension_ttl
    assert run.expires_at == expires

    assert await expire.expire_suspended(world.rt, now=expires - TICK) == []
    assert (await runs.get(db, run.id)).state is RunState.suspended

    expired = await expire.expire_suspended(world.rt, now=expires)

    assert [r.id for r in expired] == [run.id]
    after = await runs.get(db, run.id)
    assert after.state is RunState.halted and after.halt_reason == "suspension_expired"
    rows = await outbox.for_run(db, run.id)
    assert [r.kind for r in rows] == ["approval_card", "card_update", "run_notice"]
    assert rows[1].payload["token"] == run.pending_token
    assert rows[1].payload["status"] == "expired"
    assert rows[2].payload["event"] == "expired"
    assert rows[2].payload["reason"] == "suspension_expired"
    assert rows[2].payload["requester"] == "U_REP"
    assert rows[2].payload["tool"] == "send_quote"
    assert rows[2].payload["detail"] is None  # the bot words it: no ISO stamp, advice once
    [event] = await events.for_run(db, run.id, kind="expired")
    assert event.data["token"] == run.pending_token and event.data["tool"] == "send_quote"
    # The card's token no longer works, and a second sweep finds nothing.
    clock.at = expires
    late = await journeys.resume_after_confirmation(world.rt, run.pending_token, "approve",
                                                        "U_REP")
    assert late == outcomes.UnknownOrExpired(RefusalReason.expired)
    assert await expire.expire_suspended(world.rt, now=expires + timedelta(hours=1)) == []
    assert await world.crm.sent_count() == 0


async def test_expire_suspended__a_click_before_the_sweep_wins_and_the_sweep_skips(
    db: Database,
) -> None:
    clock = Clock(T0)
    world = await _world(db, clock)
    run = await journeys.start(world.rt, "U_REP", ASK)
    expires = T0 + world.rt.suspension_ttl
    clock.at = expires - TICK

    claimed = await decide.decide(world.rt, run.pending_token or "", "approve", "U_REP")
    assert isinstance(claimed, outcomes.Claimed)
    assert await expire.expire_suspended(world.rt, now=expires) == []
    result = await proceed.proceed(claimed)

    assert isinstance(result, outcomes.Executed)
    assert (await runs.get(db, run.id)).state is RunState.answered
    assert await events.for_run(db, run.id, kind="expired") == []
    assert await world.crm.sent_count() == 1


async def test_expire_suspended__approvals_racing_the_sweep_have_one_winner_each(
    db: Database,
) -> None:
    clock = Clock(T0)
    world = await _world(db, clock)
    started = [await journeys.start(world.rt, "U_REP", ASK) for _ in range(4)]
    expires = T0 + world.rt.suspension_ttl
    clock.at = expires - TICK  # the clicks come one tick before the boundary

    swept, *clicks = await asyncio.gather(
        expire.expire_suspended(world.rt, now=expires),
        *(decide.decide(world.rt, r.pending_token or "", "approve", "U_REP")
          for r in started),
    )

    assert isinstance(swept, list)
    expired_ids = {r.id for r in swept}
    for run, click in zip(started, clicks, strict=True):
        won_click = isinstance(click, outcomes.Claimed)
        assert won_click != (run.id in expired_ids), (run.id, click)
        if won_click:
            assert isinstance(click, outcomes.Claimed)
            assert isinstance(await proceed.proceed(click), outcomes.Executed)
            assert (await runs.get(db, run.id)).state is RunState.answered
        else:
            assert click == outcomes.UnknownOrExpired(RefusalReason.expired)
            after = await runs.get(db, run.id)
            assert after.state is RunState.halted and after.halt_reason == "suspension_expired"
    winners = sum(isinstance(c, outcomes.Claimed) for c in clicks)
    assert await world.crm.sent_count() == winners


async def test_purge__leaves_suspended_running_and_young_runs_alone(db: Database) -> None:
    clock = Clock(T0)
    world = await _world(db, clock)
    rt = world.rt

    async def answered() -> str:
        run = await journeys.start(rt, "U_REP", ASK)
        await journeys.resume_after_confirmation(rt, run.pending_token or "", "approve",
                                                     "U_REP")
        assert (await runs.get(db, run.id)).state is RunState.answered
        return run.id

    old_answered = await answered()
    old_halted = (await journeys.start(rt, "U_REP", ASK)).id
    assert [r.id for r in await expire.expire_suspended(rt, now=T0 + rt.suspension_ttl)] == [
        old_halted]
    old_suspended = (await journeys.start(rt, "U_REP", ASK)).id  # long past expiry: unswept
    old_running = (await journeys.begin(rt, "U_REP", ASK)).id
    clock.at = T0 + rt.retention
    young_answered = await answered()
    now = T0 + rt.retention + timedelta(days=1)

    deleted = await purge.purge(rt, now=now)

    assert deleted == 2
    assert await runs.find(db, old_answered) is None and await runs.find(db, old_halted) is None
    assert await runs.conversation(db, old_answered) == []
    assert await outbox.for_run(db, old_answered) == []
    kept = {r.id: r.state for r in await runs.list_runs(db)}
    assert kept == {old_suspended: RunState.suspended, old_running: RunState.running,
                    young_answered: RunState.answered}
    assert await purge.purge(rt, now=now) == 0
