"""The API on two real `signoff serve` replicas sharing PostgreSQL.

For each of ``TRIALS`` external calls: the agent asks on one replica, the
approver clicks on the other while the agent long-polls the first (the
decision reaches it through NOTIFY), then two execution claims race, one per
replica. Exactly one wins each time, and the ledger holds exactly one
execution per call.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import func, select

from bot.api import auth
from examples.crm import CRM
from store import api_keys, claims, engine, migrate, runs, schema
from tests.acceptance import replicas
from tests.acceptance.replicas import Card, Cluster, Replica, World, until

pytestmark = [pytest.mark.slow]

TRIALS = 100
SQLITE_TRIALS = 10
IN_FLIGHT = 8
PREVIEW = {"title": "Refund order A-1", "fields": [["Order", "A-1"]]}


async def _keys(url: str, count: int) -> list[str]:
    """One key per trial: each agent's rate limit is its own."""
    db = engine.connect(url)
    made = []
    try:
        for _ in range(count):
            key = auth.new_key()
            await api_keys.create(db, key_id=f"key_{secrets.token_hex(8)}",
                                  name=f"agent-{secrets.token_hex(4)}", key_hash=auth.key_hash(key),
                                  tools=["*"], webhook_url=None, webhook_secret=None,
                                  now=datetime.now(UTC))
            made.append(key)
    finally:
        await db.dispose()
    return made


async def _api(c: Cluster, replica: Replica, key: str, method: str, path: str,
               body: Any = None) -> tuple[int, Any]:
    async with c.http.request(method, f"{replica.url}/api/v1{path}", json=body,
                              headers={"Authorization": f"Bearer {key}"},
                              timeout=aiohttp.ClientTimeout(total=60)) as response:
        return response.status, await response.json()


async def _card_sqlite(db: engine.Database, run_id: str) -> Card:
    async def posted() -> Card | None:
        run = await runs.get(db, run_id)
        found = await claims.approvals_of(db, run_id)
        if not found or not found[0].slack_ts or not found[0].slack_channel:
            return None
        return Card(found[0].token, run_id, run.user_id, found[0].slack_channel,
                    found[0].slack_ts)

    return await until(posted, timeout=60, what=f"the card of {run_id}")


async def _card(w: World, run_id: str) -> Card:
    async def posted() -> Card | None:
        rows = await w.fetch("SELECT a.token, a.slack_channel, a.slack_ts, r.user_id "
                             "FROM approvals a JOIN runs r ON r.id = a.run_id "
                             "WHERE a.run_id = $1 AND a.slack_ts IS NOT NULL", run_id)
        if not rows:
            return None
        row = rows[0]
        return Card(row["token"], run_id, row["user_id"], row["slack_channel"], row["slack_ts"])

    return await until(posted, timeout=60, what=f"the card of {run_id}")


async def _trial(c: Cluster, w: World, a: Replica, b: Replica, key: str, n: int) -> list[int]:
    status, run = await _api(c, a, key, "POST", "/runs", {
        "external": True, "requester": replicas.user(n), "title": f"refund {n}",
        "idempotency_key": f"trial-{n}"})
    assert status == 201, run
    path = f"/runs/{run['id']}/calls"
    status, call = await _api(c, a, key, "POST", path, {
        "call_id": "c1", "tool": "refund_order", "args": {"n": n}, "preview": PREVIEW})
    assert status == 201, call
    card = await _card(w, run["id"])
    waiting = asyncio.create_task(_api(c, a, key, "GET", f"{path}/c1?wait=25"))
    assert await c.click(b, card) == 200
    status, seen = await waiting
    assert status == 200 and seen["status"] == "approved", seen
    body = {"preview": PREVIEW, "guard": {"ok": True}}
    claims = await asyncio.gather(_api(c, a, key, "POST", f"{path}/c1/execute", body),
                                  _api(c, b, key, "POST", f"{path}/c1/execute", body))
    losers = [answer["error"] for status, answer in claims if status == 409]
    assert len(losers) == 1 and losers[0] in ("already_executing", "already_executed"), claims
    return [status for status, _ in claims]


@pytest.mark.postgres
async def test_api_replicas__two_concurrent_executes_run_once_over_100_trials(
    replica_db: str, tmp_path: Path
) -> None:
    w = World(replica_db)
    keys = await _keys(replica_db, TRIALS)
    async with replicas.cluster(replica_db, tmp_path) as c:
        a, b = await c.start(2)
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(n: int) -> list[int]:
            async with gate:
                return await _trial(c, w, a, b, keys[n], n)

        try:
            results = await asyncio.gather(*(one(n) for n in range(TRIALS)))
        except AssertionError:
            print(c.logs())
            raise
        assert Counter(s for pair in results for s in pair) == {200: TRIALS, 409: TRIALS}
        ledger = await w.fetch("SELECT run_id, count(*) AS n FROM tool_calls GROUP BY run_id")
        assert len(ledger) == TRIALS and {r["n"] for r in ledger} == {1}
        executing = await w.fetch("SELECT count(*) AS n FROM api_calls WHERE status = "
                                  "'executing'")
        assert executing[0]["n"] == TRIALS
        counted = await w.fetch("SELECT sum(tool_calls) AS n FROM runs")
        assert counted[0]["n"] == TRIALS
        assert set((await c.stop_all()).values()) == {0}


async def test_api_serve_on_sqlite__long_poll_and_racing_executes_in_one_process(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    db = engine.connect(url)
    try:
        await migrate.upgrade(db)
        await CRM(db).setup()
        [key] = await _keys(url, 1)
        async with replicas.cluster(url, tmp_path) as c:
            [only] = await c.start(1)
            for n in range(SQLITE_TRIALS):
                status, run = await _api(c, only, key, "POST", "/runs", {
                    "external": True, "requester": replicas.user(n), "title": f"r{n}",
                    "idempotency_key": f"sqlite-{n}"})
                assert status == 201, run
                path = f"/runs/{run['id']}/calls"
                assert (await _api(c, only, key, "POST", path, {
                    "call_id": "c1", "tool": "refund_order", "preview": PREVIEW}))[0] == 201
                card = await _card_sqlite(db, run["id"])
                waiting = asyncio.create_task(_api(c, only, key, "GET", f"{path}/c1?wait=25"))
                assert await c.click(only, card) == 200
                assert (await waiting)[1]["status"] == "approved"
                body = {"preview": PREVIEW}
                claims = await asyncio.gather(
                    *(_api(c, only, key, "POST", f"{path}/c1/execute", body) for _ in range(2)))
                assert sorted(s for s, _ in claims) == [200, 409], claims
            assert set((await c.stop_all()).values()) == {0}
        async with db.read() as conn:
            executed = (await conn.execute(select(func.count()).select_from(
                schema.tool_calls))).scalar_one()
        assert executed == SQLITE_TRIALS
    finally:
        await db.dispose()
