"""Memory: RSS of a real `signoff serve` process, idle and as runs pass through it.

Starts `signoff serve` (quotes example app, SQLite, the Slack stand-in in this
process), measures its RSS (psutil, children included) once idle, then drives
runs through it in batches — ``/signoff ask``, wait for the approval card,
Approve, wait for the run to be answered — sampling RSS after each batch.

Target: flat. What a run needs lives in the database; a process whose memory
grows with the number of runs it has served holds something it should not
(a cache without bound, tasks never released, cards kept in memory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil  # type: ignore[import-untyped]  # types-psutil is not a bench dependency
from sqlalchemy import func, select

from bench import common, databases
from bot import ids
from bot.sandbox import FakeSlack, signing
from examples.crm import CRM
from store import engine, schema
from tests.bot import harness

CONCURRENCY = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss(proc: psutil.Process) -> int:
    return int(proc.memory_info().rss + sum(c.memory_info().rss
                                            for c in proc.children(recursive=True)))


class Driver:
    """Sends Slack-shaped requests to the served process and waits on its database."""

    def __init__(self, url: str, fake: FakeSlack, db: engine.Database,
                 http: aiohttp.ClientSession) -> None:
        self.url, self.fake, self.db, self.http = url, fake, db, http
        self.cards: dict[str, Any] = {}
        self._seen = 0

    async def post(self, body: str) -> None:
        headers = signing.signed_headers(harness.SECRET, body)
        async with self.http.post(self.url + ids.EVENTS_PATH, data=body.encode(),
                                  headers=headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"signoff answered {response.status}")

    async def ask(self) -> None:
        url = self.fake.response_url(harness.COMMAND_CHANNEL, user=harness.REP)
        await self.post(signing.slash_command_body(
            harness.REP, f"ask {harness.ASK}", harness.COMMAND_CHANNEL, url,
            signing.new_trigger_id()))

    async def approve(self, token: str) -> None:
        card = self.cards.pop(token)
        url = self.fake.response_url(card.channel, message_ts=card.ts, user=harness.REP)
        await self.post(signing.block_actions_body(
            harness.REP, ids.APPROVE_ACTION, token, card.channel, card.ts, url,
            signing.new_trigger_id(),
            {"type": "message", "ts": card.ts, "text": card.text, "blocks": card.blocks}))

    def index_cards(self) -> None:
        messages = self.fake.messages()
        for m in messages[self._seen:]:
            for block in m.blocks:
                for el in block.get("elements", []) if isinstance(block, dict) else []:
                    if isinstance(el, dict) and el.get("action_id") == ids.APPROVE_ACTION:
                        self.cards[str(el["value"])] = m
        self._seen = len(messages)

    async def count(self, state: str) -> int:
        t = schema.runs
        async with self.db.read() as conn:
            return int((await conn.execute(
                select(func.count()).select_from(t).where(t.c.state == state))).scalar_one())

    async def wait_cards(self, n: int, timeout: float = 120) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            self.index_cards()
            if len(self.cards) >= n:
                return list(self.cards)[:n]
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self.cards)} of {n} approval cards posted")
            await asyncio.sleep(0.2)

    async def wait_answered(self, n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while (done := await self.count("answered")) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done} of {n} runs answered")
            await asyncio.sleep(0.2)


async def _gather_limited(coros: list[Any]) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def drive(args: argparse.Namespace, total: int, batch: int) -> list[list[Any]]:
    async with databases.fresh("sqlite", args.pg, migrated=False) as target, FakeSlack() as fake:
        db = target.connect()
        await CRM(db).setup()  # the quotes example's tables (SIGNOFF_APP does not create them)
        port = _free_port()
        env = {**os.environ, "SLACK_BOT_TOKEN": harness.TOKEN,
               "SLACK_SIGNING_SECRET": harness.SECRET, "SLACK_API_URL": fake.api_url,
               "DATABASE_URL": target.url, "SIGNOFF_APP": "examples.quotes:app",
               "SIGNOFF_APPROVALS_CHANNEL": harness.APPROVALS, "PORT": str(port),
               "SIGNOFF_OUTBOX_INTERVAL_SECONDS": "0.5"}
        log = Path(str(target.path) + ".serve.log").open("w")
        serve = subprocess.Popen([str(Path(sys.executable).with_name("signoff")), "serve"],
                                 env=env, stdout=log, stderr=subprocess.STDOUT)
        proc = psutil.Process(serve.pid)
        rows: list[list[Any]] = []
        try:
            url = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as http:
                await _ready(http, url, serve)
                await asyncio.sleep(2)
                rows.append([0, rss(proc) // 1024 // 1024, 0.0])
                driver = Driver(url, fake, db, http)
                done = 0
                start = common.now()
                while done < total:
                    n = min(batch, total - done)
                    await _gather_limited([driver.ask() for _ in range(n)])
                    tokens = await driver.wait_cards(n)
                    await _gather_limited([driver.approve(t) for t in tokens])
                    done += n
                    await driver.wait_answered(done)
                    rows.append([done, rss(proc) // 1024 // 1024, common.now() - start])
                    print(rows[-1], flush=True)
                await asyncio.sleep(2)
                rows.append([f"{done} + 2 s idle", rss(proc) // 1024 // 1024,
                             common.now() - start])
        finally:
            serve.terminate()
            serve.wait(timeout=30)
            await db.dispose()
            log.close()
    return rows


async def _ready(http: aiohttp.ClientSession, url: str, serve: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            raise RuntimeError(f"signoff serve exited {serve.returncode}")
        try:
            async with http.get(url + ids.HEALTH_PATH) as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError("signoff serve never answered /healthz")


async def main(args: argparse.Namespace) -> None:
    total = 1_000 if args.quick else args.runs
    batch = max(1, total // 10)
    rows = await drive(args, total, batch)
    idle, last = rows[0][1], rows[-1][1]
    body = (
        f"`signoff serve` (SQLite, examples.quotes:app, stand-in Slack in the bench process); "
        f"runs in batches of {batch} (ask -> card -> Approve -> answered), {CONCURRENCY} "
        "requests in flight. RSS includes child processes.\n\n"
        + common.table(["runs passed through", "RSS MiB", "elapsed s"], rows)
        + f"\n\nGrowth idle -> after {total:,} runs: {last - idle} MiB "
        f"({json.dumps(last / idle if idle else 0)[:5]}x; target flat)."
    )
    args.no_pg = True
    await common.publish(args, "Memory of signoff serve", body)


if __name__ == "__main__":
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10_000)
    common.run(main(p.parse_args()))
