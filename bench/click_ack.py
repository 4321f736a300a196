"""Click to ack: HTTP response time of N concurrent signed Approve clicks, and Socket Mode's.

signoff: the real server (``bot.server.build_server``, signature verification
on, the quotes example app, the Slack stand-in), each click on its own
suspended run made through ``/signoff ask``. Baseline: a Bolt ``AsyncApp``
with the same signing secret and client whose approve handler only acks,
served the same way. N = 50 and 200; the two servers alternate round by round;
requests are built and signed before the clock starts and sent over a client
with no connection limit. Between rounds signoff's background work (the resumed
runs) is drained so one round's work does not land on the next.

Socket Mode column: the same server with ``SLACK_APP_TOKEN`` set, the same N
clicks sent at once as envelopes over the stand-in's WebSocket; the time from
the envelope leaving the stand-in to its ack arriving back (envelope-to-ack),
on its own suspended runs, measured in its own rounds after the HTTP ones.

Target: signoff's p99 <= 1.3x the ack-only app's, and well under Slack's 3 s,
over HTTP and over Socket Mode.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bench import common, databases
from bot import ids
from bot.sandbox import signing
from store import claims, schema
from tests.bot import harness, socket_harness

ASK = harness.ASK


async def _serve(web_app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@asynccontextmanager
async def ack_only(api_url: str) -> AsyncIterator[str]:
    """The baseline: same Bolt, same verification, a handler that only acks."""
    app = AsyncApp(client=AsyncWebClient(token=harness.TOKEN, base_url=api_url),
                   signing_secret=harness.SECRET, process_before_response=False,
                   request_verification_enabled=True, name="ack-only")

    @app.action(ids.APPROVE_ACTION)
    async def _approve(ack: Any) -> None:
        await ack()

    runner, url = await _serve(app.web_app(path=ids.EVENTS_PATH, port=0))
    try:
        yield url
    finally:
        await runner.cleanup()


async def suspended_tokens(world: harness.BotWorld, n: int) -> list[str]:
    """``n`` runs suspended on their approval card, through /signoff ask."""
    for _ in range(n):
        await world.command(harness.REP, f"ask {ASK}")
    await world.deliver()
    async with world.db.read() as conn:
        rows = (await conn.execute(
            schema.approvals.select().where(schema.approvals.c.decided_by.is_(None))
        )).mappings().all()
    tokens = [r["token"] for r in rows]
    if len(tokens) < n:
        raise RuntimeError(f"only {len(tokens)} of {n} runs suspended: is the quotes script "
                           "still the one that asks to send?")
    return tokens


def _requests(world: harness.BotWorld, tokens: list[str]) -> list[tuple[bytes, dict[str, str]]]:
    out = []
    for token in tokens:
        body = world.click_body(harness.REP, ids.APPROVE_ACTION, token)
        out.append((body.encode(), signing.signed_headers(harness.SECRET, body)))
    return out


async def fire(http: aiohttp.ClientSession, url: str,
               requests: list[tuple[bytes, dict[str, str]]]) -> list[float]:
    async def one(body: bytes, headers: dict[str, str]) -> float:
        start = common.now()
        async with http.post(url + ids.EVENTS_PATH, data=body, headers=headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"click answered {response.status}")
        return common.now() - start

    return list(await asyncio.gather(*(one(b, h) for b, h in requests)))


async def measure(url: str, n: int, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"signoff": [], "ack-only": []}
    async with harness.bot_world(url) as world, ack_only(world.fake.api_url) as base_url, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for r in range(rounds + 1):  # round 0 warms both up and is not counted
            tokens = await suspended_tokens(world, n)
            mine = _requests(world, tokens)
            base = _requests(world, tokens)  # same bodies; the baseline only acks
            order = [("signoff", world.url, mine), ("ack-only", base_url, base)]
            for side, target, reqs in order if r % 2 == 0 else reversed(order):
                times = await fire(http, target, reqs)
                await world.settle()
                if r:
                    out[side] += times
            decided = [a for a in [await claims.approval(world.db, t) for t in tokens]
                       if a is not None and a.decided_by is not None]
            if len(decided) != n:
                raise RuntimeError(f"{n - len(decided)} clicks decided nothing")
    return out


async def fire_envelopes(world: socket_harness.SocketWorld, bodies: list[str]) -> list[float]:
    async def one(body: str) -> float:
        start = common.now()
        answer = await world.socket.deliver_form(body)
        if answer["status"] != 200:
            raise RuntimeError(f"envelope not acked: {answer}")
        return common.now() - start

    return list(await asyncio.gather(*(one(b) for b in bodies)))


async def measure_socket(url: str, n: int, rounds: int) -> list[float]:
    """Envelope-to-ack times of ``n`` concurrent clicks per round, over Socket Mode."""
    out: list[float] = []
    async with socket_harness.socket_world(url) as world:
        for r in range(rounds + 1):  # round 0 warms up and is not counted
            tokens = await suspended_tokens(world, n)
            bodies = [world.click_body(harness.REP, ids.APPROVE_ACTION, t) for t in tokens]
            times = await fire_envelopes(world, bodies)
            await world.settle()
            if r:
                out += times
    return out


async def main(args: argparse.Namespace) -> None:
    rounds = 1 if args.quick else args.rounds
    rows: list[list[Any]] = []
    for dialect in common.dialects(args):
        for n in (50, 200):
            async with databases.fresh(dialect, args.pg) as target:
                times = await measure(target.url, n, rounds)
            async with databases.fresh(dialect, args.pg) as target:
                times["socket"] = await measure_socket(target.url, n, rounds)
            p = {side: [common.percentile(v, q) * 1000 for q in (50, 95, 99)]
                 for side, v in times.items()}
            worst = max(p["signoff"][2], p["socket"][2])
            rows.append([dialect, n, *p["signoff"], *p["ack-only"],
                         common.verdict(p["signoff"][2] / p["ack-only"][2], 1.3),
                         *p["socket"], "yes" if worst < 3000 else "NO"])
            print(rows[-1], flush=True)
    headers = ["database", "N", "HTTP p50 ms", "p95", "p99", "ack-only p50 ms", "p95",
               "p99", "HTTP p99 ratio", "Socket Mode p50 ms", "p95", "p99", "p99s < 3 s"]
    body = (f"{rounds} counted rounds of N concurrent clicks per side (after a warm-up round), "
            "HTTP sides alternated; every click on its own suspended quotes run. Socket Mode: "
            "envelope sent by the stand-in to ack received, same N, its own rounds.\n\n"
            + common.table(headers, rows))
    await common.publish(args, "Click to ack", body)


if __name__ == "__main__":
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    common.run(main(p.parse_args()))
