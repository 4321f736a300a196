"""What the scheduled purge and the reaper's pass at start actually do to the runs.

A scheduled job that fails costs only a logged job_failed and runs again at its
next interval, so these tests look at the rows, not at the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from slack_sdk.web.async_client import AsyncWebClient

from bot import config, scheduler
from bot.sandbox import fake_slack
from bot.services import Services
from resume import expire
from resume.runtime import Runtime
from store import runs, schema
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world

APPROVALS = "C0APPROVALS"
REP = "U0REP"
TICK = 0.05


class Clock:
    """The runtime's clock, set by the test."""

    def __init__(self, at: datetime) -> None:
        self.at: datetime | None = at

    def __call__(self) -> datetime:
        return self.at or datetime.now(UTC)


def _services(rt: Runtime, fake: fake_slack.FakeSlack, **intervals: float) -> Services:
    settings = config.load_settings(approvals_channel=APPROVALS, **intervals)
    client = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    return Services(rt=rt, settings=settings, client=client)


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(TICK / 2)


async def _answered(rt: Runtime) -> str:
    run = await journeys.start(rt, REP, ASK)
    await journeys.resume_after_confirmation(rt, run.pending_token or "", "approve", REP)
    assert (await runs.get(rt.db, run.id)).state is RunState.answered
    return run.id


async def _halted(rt: Runtime) -> str:
    """A run halted by expiry, as the expiry sweep at its deadline leaves it."""
    run = await journeys.start(rt, REP, ASK)
    assert run.expires_at is not None
    [swept] = await expire.expire_suspended(rt, now=run.expires_at)
    assert swept.id == run.id and swept.state is RunState.halted
    return run.id


async def test_scheduler__the_purge_job_deletes_finished_runs_past_retention(
    db: Database, fake: fake_slack.FakeSlack
) -> None:
    three_days_ago = datetime.now(UTC) - timedelta(days=3)
    clock = Clock(three_days_ago)
    world = await quotes_world(db, approvals_channel=APPROVALS, retention=timedelta(days=1),
                               clock=clock)
    old_answered = await _answered(world.rt)
    old_halted = await _halted(world.rt)
    clock.at = None  # back to the real time
    young_answered = await _answered(world.rt)
    young_halted = await _halted(world.rt)
    # Every job but the purge waits an hour: only the purge can delete anything.
    services = _services(world.rt, fake, expiry_interval_seconds=3600,
                         reaper_interval_seconds=3600, outbox_interval_seconds=3600,
                         purge_interval_hours=TICK / 3600)

    started = scheduler.start(services)
    try:
        async def purged() -> bool:
            return (await runs.find(db, old_answered) is None
                    and await runs.find(db, old_halted) is None)

        await _eventually(purged, timeout=15)
    finally:
        await scheduler.stop(started)

    kept = {r.id: r.state for r in await runs.list_runs(db)}
    assert kept == {young_answered: RunState.answered, young_halted: RunState.halted}


async def test_scheduler__one_reaper_pass_at_start_recovers_an_orphan_at_once(
    db: Database, fake: fake_slack.FakeSlack
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    # A run whose worker died ten minutes ago: running, heartbeat long past orphan_after.
    orphan = await journeys.begin(world.rt, REP, ASK)
    stale = datetime.now(UTC) - timedelta(minutes=10)
    async with db.write() as conn:
        await conn.execute(schema.runs.update().where(schema.runs.c.id == orphan.id)
                           .values(heartbeat_at=stale))
    services = _services(world.rt, fake, reaper_interval_seconds=3600)

    started = scheduler.start(services)
    try:
        async def recovered() -> bool:
            run = await runs.get(db, orphan.id)
            return run.state is RunState.suspended and run.recovery_attempts == 1

        await _eventually(recovered, timeout=10)  # not in an hour
    finally:
        await scheduler.stop(started)

    run = await runs.get(db, orphan.id)
    assert run.pending_token is not None  # it asked for the approval its worker never asked
