"""The scheduled jobs run on tiny intervals, deliver, expire, recover, and survive failures."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot import config, scheduler
from bot.sandbox import fake_slack
from bot.services import Services
from store import engine, runs
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, QuotesWorld, quotes_world

APPROVALS = "C0APPROVALS"
REP = "U0REP"
TICK = 0.05


def _services(world: QuotesWorld, fake: fake_slack.FakeSlack, *, tiny: bool = True) -> Services:
    intervals = dict(
        expiry_interval_seconds=TICK, reaper_interval_seconds=TICK,
        outbox_interval_seconds=TICK, purge_interval_hours=TICK / 3600,
    ) if tiny else {}
    settings = config.load_settings(approvals_channel=APPROVALS, **intervals)
    client = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    return Services(rt=world.rt, settings=settings, client=client)


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(TICK / 2)


async def test_scheduler__delivers_expires_and_recovers_on_its_own(
    db: Database, fake: fake_slack.FakeSlack
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS,
                               suspension_ttl=timedelta(seconds=1),
                               orphan_after=timedelta(seconds=0.3))
    services = _services(world, fake)
    suspended = await journeys.start(world.rt, REP, ASK)
    # A run nobody drives: started, then its worker "died". The reaper must pick it up.
    orphan = await journeys.begin(world.rt, REP, ASK)

    started = scheduler.start(services)
    try:
        assert set(scheduler.jobs(started)) == {"expire", "reap", "outbox", "purge"}

        async def expired_and_told() -> bool:
            run = await runs.get(db, suspended.id)
            cards = [m for m in fake.messages(APPROVALS)
                     if (suspended.pending_token or "?") in json.dumps(m.blocks)]
            return (run.state is RunState.halted and len(cards) == 1 and cards[0].edits == 1
                    and any(m.thread_ts == cards[0].ts for m in fake.messages(APPROVALS)))

        async def orphan_recovered() -> bool:
            run = await runs.get(db, orphan.id)
            return run.state is RunState.suspended and run.recovery_attempts == 1

        await _eventually(orphan_recovered)
        await _eventually(expired_and_told)
    finally:
        await scheduler.stop(started)
    assert not started.running
    assert (await runs.get(db, suspended.id)).halt_reason == "suspension_expired"


async def test_scheduler__kick_is_installed_and_removed(
    db: Database, fake: fake_slack.FakeSlack
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    services = _services(world, fake, tiny=False)  # the outbox job runs every 2 s
    before = services.kicker
    started = scheduler.start(services)
    try:
        await asyncio.sleep(TICK)  # the first outbox pass has run and found nothing
        run = await journeys.start(world.rt, REP, ASK)
        services.kick()

        async def posted() -> bool:
            return any((run.pending_token or "?") in json.dumps(m.blocks) for m in fake.messages())

        await _eventually(posted, timeout=1.5)  # well before the 2 s interval
    finally:
        await scheduler.stop(started)
    assert services.kicker == before


UNREACHABLE_DATABASE = "postgresql+asyncpg://postgres@127.0.0.1:1/signoff"


async def test_scheduler__a_failing_job_does_not_stop_it(
    db: Database, fake: fake_slack.FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world = await quotes_world(db, approvals_channel=APPROVALS,
                               suspension_ttl=timedelta(milliseconds=100))
    run = await journeys.start(world.rt, REP, ASK)
    services = _services(world, fake)
    # A refused TCP connection, not a SQLite file in a missing folder: aiosqlite's worker
    # thread for a failed connect can outlive the test's event loop and fail a later test.
    unreachable = engine.connect(UNREACHABLE_DATABASE)
    world.rt.db = unreachable  # the database "goes away" for the resume jobs

    started = scheduler.start(services)
    try:
        with caplog.at_level(logging.WARNING, logger="bot.scheduler"):
            async def failed_repeatedly() -> bool:
                failed = [getattr(r, "job", None) for r in caplog.records
                          if getattr(r, "action", None) == "job_failed"]
                return all(failed.count(job) >= 3 for job in ("expire", "reap", "purge"))

            await _eventually(failed_repeatedly)
        assert started.running
        assert (await runs.get(db, run.id)).state is RunState.suspended

        world.rt.db = db  # ... and comes back: the same scheduler carries on

        async def expired() -> bool:
            return (await runs.get(db, run.id)).state is RunState.halted

        await _eventually(expired)
    finally:
        await scheduler.stop(started)
        await unreachable.dispose()
