"""GET /metrics after real clicks, parsed with prometheus_client's own text parser."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from bot import ids, metrics, scheduler, server
from bot.sandbox import FakeSlack
from examples import quotes
from examples.crm import CRM
from store import engine, runs, schema
from store.states import RunState
from tests.bot.api_harness import Agent, make_key
from tests.bot.harness import APPROVALS, ASK, REP, BotWorld, bot_world, settings_for
from tests.bot.socket_harness import socket_world
from tests.store import factories

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(world: BotWorld, headers: dict[str, str] | None = None) -> Samples:
    async with world.http.get(world.url + ids.METRICS_PATH, headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/plain"
        return parse(await response.text())


@pytest.fixture
def fresh_store_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scrape reads the store (the 5 s cache is tested on its own)."""
    monkeypatch.setattr(metrics, "STORE_MAX_AGE_SECONDS", 0.0)


@pytest.fixture
async def world(database_url: str, fresh_store_readings: None) -> AsyncIterator[BotWorld]:
    async with bot_world(database_url) as w:
        yield w


async def test_metrics__a_click_is_counted_and_the_store_gauges_follow(world: BotWorld) -> None:
    before = await scrape(world)
    run = await world.asked()
    suspended = await scrape(world)
    assert value(suspended, "signoff_runs", state="suspended") == 1
    assert value(suspended, "signoff_outbox_pending") == 0  # the card went out

    await world.click(REP, ids.APPROVE_ACTION, run.pending_token or "")
    await world.deliver()
    await world.click(REP, ids.APPROVE_ACTION, run.pending_token or "")  # too late
    after = await scrape(world)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("signoff_decisions_total", decision="approve") == 1
    assert grew("signoff_decisions_total", decision="decline") == 0
    assert grew("signoff_refusals_total", reason="already_resumed") == 1
    assert grew("signoff_click_ack_seconds_count", transport="http") == 2
    assert grew("signoff_approval_wait_seconds_count") == 1
    assert grew("signoff_tool_calls_total", tool="send_quote", status="succeeded") == 1
    assert value(after, "signoff_runs", state="answered") == 1
    assert value(after, "signoff_runs", state="suspended") == 0
    assert value(after, "signoff_outbox_pending") == 0
    assert await world.crm.sent_count() == 1


async def test_metrics__the_approval_wait_is_how_long_the_request_waited(
    world: BotWorld,
) -> None:
    run = await world.asked()
    # Asked ten minutes ago (time is set by writing the rows, not by waiting).
    asked_at = datetime.now(UTC) - timedelta(minutes=10)
    async with world.db.write() as conn:
        await conn.execute(update(schema.approvals).where(
            schema.approvals.c.token == run.pending_token).values(created_at=asked_at))
        await conn.execute(update(schema.runs).where(schema.runs.c.id == run.id).values(
            expires_at=asked_at + world.services.rt.suspension_ttl))
    before = await scrape(world)
    await world.click(REP, ids.APPROVE_ACTION, run.pending_token or "")
    after = await scrape(world)

    waited = (value(after, "signoff_approval_wait_seconds_sum")
              - value(before, "signoff_approval_wait_seconds_sum"))
    assert 600 <= waited < 900
    assert await world.crm.sent_count() == 1


async def test_metrics__socket_mode_clicks_are_timed_as_socket_mode(
    database_url: str, fresh_store_readings: None,
) -> None:
    async with socket_world(database_url) as world:
        before = await scrape(world)
        run = await world.asked()
        await world.click(REP, ids.APPROVE_ACTION, run.pending_token or "")
        after = await scrape(world)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("signoff_click_ack_seconds_count", transport="socket_mode") == 1
    assert grew("signoff_click_ack_seconds_count", transport="http") == 0
    assert grew("signoff_decisions_total", decision="approve") == 1


async def test_metrics__store_gauges_are_cached_between_scrapes(tmp_path: Path) -> None:
    async with bot_world(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}") as world:
        first = await scrape(world)
        await world.asked()
        cached = await scrape(world)  # well within the cache's age: not re-read

    assert value(first, "signoff_runs", state="suspended") == 0
    assert value(cached, "signoff_runs", state="suspended") == 0


async def test_metrics__with_a_token_every_scrape_needs_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    async with bot_world(url, SIGNOFF_METRICS_TOKEN="scrape-me-please") as world:
        for headers in (None, {"Authorization": "Bearer wrong-token"},
                        {"Authorization": "scrape-me-please"}):
            async with world.http.get(world.url + ids.METRICS_PATH, headers=headers) as r:
                assert r.status == 401
                assert "signoff_" not in await r.text()
        samples = await scrape(world, {"Authorization": "Bearer scrape-me-please"})
    assert ("signoff_outbox_pending", frozenset()) in samples


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only, nothing is sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


async def test_metrics__without_a_token_only_loopback_may_scrape(tmp_path: Path) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address to scrape from")
    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    async with FakeSlack() as fake:
        db = engine.connect(url)
        web_app, services = await server.build_server(
            settings_for(url, fake), app=quotes.build(CRM(db)), db=db)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        try:
            for host in (address, "127.0.0.1"):
                await web.TCPSite(runner, host, 0).start()
            (_, outside), (_, inside) = runner.addresses
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://{address}:{outside}{ids.METRICS_PATH}") as refused:
                    assert refused.status == 403
                    text = await refused.text()
                    assert "SIGNOFF_METRICS_TOKEN" in text and "signoff_runs" not in text
                async with http.get(f"http://127.0.0.1:{inside}{ids.METRICS_PATH}") as allowed:
                    assert allowed.status == 200
                    assert "signoff_runs" in await allowed.text()
        finally:
            await runner.cleanup()
            await services.drain(timeout=10)
            await db.dispose()


async def test_metrics__orphans_and_requests_waiting_past_half_their_time(
    world: BotWorld,
) -> None:
    await factories.make_run(world.db)  # running, heartbeat now
    await factories.make_suspended(world.db, ttl=timedelta(minutes=30))
    now = datetime.now(UTC)
    fresh = await scrape(world)

    world.services.rt.clock = lambda: now + timedelta(minutes=16)  # reaper and people idle
    later = await scrape(world)

    assert value(fresh, "signoff_orphans") == 0
    assert value(fresh, "signoff_approvals_waiting_long") == 0
    assert value(later, "signoff_orphans") == 1
    assert value(later, "signoff_approvals_waiting_long") == 1
    assert value(later, "signoff_runs", state="running") == 1


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(15):
        while not await check():
            await asyncio.sleep(0.02)


async def test_metrics__scheduled_jobs_count_expiries_and_recoveries(
    database_url: str, fresh_store_readings: None,
) -> None:
    async with bot_world(database_url, SIGNOFF_EXPIRY_INTERVAL_SECONDS="0.05",
                         SIGNOFF_REAPER_INTERVAL_SECONDS="0.05") as world:
        before = await scrape(world)
        waiting = await world.asked()
        await world.command(REP, f"ask {ASK}")
        orphan = next(r for r in await runs.list_runs(world.db, user_id=REP)
                      if r.id != waiting.id)
        # One run's request is left to expire; the other's worker "died" mid-run.
        async with world.db.write() as conn:
            await conn.execute(schema.runs.update().where(schema.runs.c.id == orphan.id)
                               .values(state="running", heartbeat_at=datetime.now(UTC)
                                       - timedelta(minutes=10)))
        world.services.rt.clock = lambda: datetime.now(UTC) + timedelta(minutes=31)

        jobs = scheduler.start(world.services)
        try:
            async def swept() -> bool:
                halted = (await runs.get(world.db, waiting.id)).state is RunState.halted
                return halted and (await runs.get(world.db, orphan.id)).recovery_attempts == 1

            await _until(swept)
        finally:
            await scheduler.stop(jobs)
        after = await scrape(world)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("signoff_expired_total") == 1
    assert grew("signoff_recoveries_total", outcome="recovered") == 1
    assert grew("signoff_recoveries_total", outcome="exhausted") == 0


async def test_metrics__a_card_slack_refuses_for_good_is_a_dead_letter(world: BotWorld) -> None:
    before = await scrape(world)
    world.fake.fail_next("chat.postMessage", error="channel_not_found")

    await world.command(REP, f"ask {ASK}")
    await world.deliver()
    after = await scrape(world)

    assert value(after, "signoff_outbox_dead_total") - value(
        before, "signoff_outbox_dead_total") == 1
    assert value(after, "signoff_outbox_pending") == 0
    assert world.fake.messages(APPROVALS) == []


async def test_metrics__a_click_the_door_refuses_is_not_an_ack(world: BotWorld) -> None:
    run = await world.asked()
    before = await scrape(world)
    body = world.click_body(REP, ids.APPROVE_ACTION, run.pending_token or "")
    assert (await world.post(body, secret="not-the-signing-secret"))[0] == 401
    after = await scrape(world)
    assert value(after, "signoff_click_ack_seconds_count", transport="http") \
        == value(before, "signoff_click_ack_seconds_count", transport="http")
    assert (await runs.get(world.db, run.id)).state is RunState.suspended  # nothing happened


async def test_metrics__api_requests_are_counted_by_route_never_by_id(world: BotWorld) -> None:
    before = await scrape(world)
    agent = Agent(world, await make_key(world.db))
    run = await agent.start()
    assert (await agent.call("GET", f"/runs/{run['id']}"))[0] == 200
    assert (await agent.call("GET", "/runs/run_that_does_not_exist"))[0] == 404
    assert (await world.get(f"/api/v1/runs/{run['id']}"))[0] == 401  # no key
    assert (await agent.call("GET", "/no/such/path"))[0] == 404
    assert (await agent.call("DELETE", "/runs"))[0] == 405
    assert (await world.get("/api/v1/openapi.json"))[0] == 200
    assert (await agent.ask(run["id"]))[0] == 201
    await agent.get_call(run["id"], wait=0.2)  # a long-poll that times out: one answer
    after = await scrape(world)

    def grew(route: str, status: str) -> float:
        labels = {"route": route, "status": status}
        return value(after, "signoff_api_requests_total", **labels) \
            - value(before, "signoff_api_requests_total", **labels)

    assert grew("POST /api/v1/runs", "201") == 1
    assert grew("GET /api/v1/runs/{run_id}", "200") == 1
    assert grew("GET /api/v1/runs/{run_id}", "404") == 1
    assert grew("GET /api/v1/runs/{run_id}", "401") == 1
    assert grew("unmatched", "404") == 1
    assert grew("unmatched", "405") == 1
    assert grew("GET /api/v1/openapi.json", "200") == 1
    assert grew("GET /api/v1/runs/{run_id}/calls/{call_id}", "200") == 1
    labels = {v for (name, pairs) in after for _, v in pairs
              if name == "signoff_api_requests_total"}
    assert not any(run["id"] in v or "run_that_does_not_exist" in v for v in labels)
