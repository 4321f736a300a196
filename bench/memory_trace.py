"""Memory trace: what `signoff serve` keeps as runs pass through it (tracemalloc diff).

A debugging aid for ``bench/memory.py``'s "not flat" result, run by hand, never
by the test suite; it prints and writes nothing. In this one process it builds
the server exactly as ``signoff serve`` does (``bot.server.build_server`` with
the quotes example app, the scheduler and its outbox relay started), serves it on
127.0.0.1, and drives runs through it with signed requests against the Slack
stand-in (ask -> card -> Approve -> answered, like ``bench/memory.py``). After
``--warmup``, ``--first`` and ``--second`` runs it collects garbage, takes a tracemalloc
snapshot and counts live objects by type, then prints:

- the top growth between the two snapshots, grouped by traceback;
- the live objects whose count grew;
- RSS at each point, before and after ``malloc_trim(0)`` (a leak stays after
  the trim; the allocator's high-water mark does not).

The stand-in and this script's own driver share the process, so allocations
made under ``bot/sandbox`` or this file are filtered out of the diff.

    PYTHONTRACEMALLOC=25 python -m bench.memory_trace --first 500 --second 1500
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import ctypes
import ctypes.util
import gc
import logging
import tempfile
import tracemalloc
from pathlib import Path

import aiohttp
import psutil  # type: ignore[import-untyped]  # types-psutil is not a bench dependency
from aiohttp import web

from bench import memory
from bot import scheduler, server
from bot.sandbox import FakeSlack
from examples import quotes
from examples.crm import CRM
from store import engine
from tests.bot import harness

_IGNORED = ["*/bot/sandbox/*", __file__, memory.__file__, tracemalloc.__file__,
            "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"]


def _rss_mib() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def _malloc_trim() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0))
    except AttributeError:  # not glibc
        return False


def _types() -> collections.Counter[str]:
    return collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}"
                               for o in gc.get_objects())


class Point:
    """One measurement: a filtered snapshot, live object counts, RSS before/after a trim."""

    def __init__(self, runs: int) -> None:
        gc.collect()
        self.runs = runs
        self.rss = _rss_mib()
        self.snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, pattern, all_frames=True) for pattern in _IGNORED]
        ) if tracemalloc.is_tracing() else None
        self.types = _types()
        stats = self.snapshot.statistics("filename") if self.snapshot is not None else []
        self.traced = sum(s.size for s in stats)
        _malloc_trim()
        self.rss_trimmed = _rss_mib()
        print(f"after {runs:>6} runs: RSS {self.rss:7.1f} MiB, {self.rss_trimmed:7.1f} MiB "
              f"after malloc_trim; traced (filtered) {self.traced / 2**20:7.2f} MiB; "
              f"gc objects {sum(self.types.values()):,}", flush=True)


async def _drive(driver: memory.Driver, done: int, upto: int, batch: int) -> int:
    while done < upto:
        n = min(batch, upto - done)
        await memory._gather_limited([driver.ask() for _ in range(n)])
        tokens = await driver.wait_cards(n)
        await memory._gather_limited([driver.approve(t) for t in tokens])
        done += n
        await driver.wait_answered(done)
    return done


def _report(a: Point, b: Point, top: int) -> None:
    runs = b.runs - a.runs
    print(f"\n== growth {a.runs} -> {b.runs} runs ({runs} runs) ==")
    print(f"RSS {b.rss - a.rss:+.1f} MiB ({(b.rss - a.rss) * 2**20 / runs / 1024:+.1f} KiB/run); "
          f"after trim {b.rss_trimmed - a.rss_trimmed:+.1f} MiB; traced (filtered) "
          f"{(b.traced - a.traced) / 2**20:+.2f} MiB "
          f"({(b.traced - a.traced) / runs / 1024:+.2f} KiB/run)")
    if a.snapshot is not None and b.snapshot is not None:
        _diff(a.snapshot, b.snapshot, top)
    print("\n-- live objects whose count grew (gc-tracked, by type) --")
    grown = [(t, b.types[t] - a.types.get(t, 0)) for t in b.types]
    for name, diff in sorted(grown, key=lambda x: -x[1])[:top]:
        if diff <= 0:
            break
        print(f"{diff:+8d} ({diff / runs:+.2f}/run)  {name}")


def _diff(a: tracemalloc.Snapshot, b: tracemalloc.Snapshot, top: int) -> None:
    print("\n-- top growth by line --")
    for stat in b.compare_to(a, "lineno")[:top]:
        print(f"{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
              f"{stat.traceback[0]}")
    print("\n-- top growth by traceback (innermost frame last, project frames only) --")
    for stat in b.compare_to(a, "traceback")[:top]:
        if stat.size_diff <= 0:
            break
        print(f"\n{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
        frames = [f for f in stat.traceback if "/work/main/" in f.filename] or list(
            stat.traceback)[-3:]
        for frame in frames[-8:]:
            print(f"      {frame.filename.replace('/work/main/', '')}:{frame.lineno}")


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.ERROR)  # serve's log lines would drown the report
    memory.CONCURRENCY = args.concurrency
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'trace.db'}"
        async with FakeSlack() as fake:
            db = engine.connect(url)
            crm = CRM(db)
            settings = harness.settings_for(url, fake, SIGNOFF_OUTBOX_INTERVAL_SECONDS="0.5")
            web_app, services = await server.build_server(settings, app=quotes.build(crm), db=db)
            await crm.setup()
            runner = web.AppRunner(web_app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            jobs = scheduler.start(services)
            try:
                base = f"http://127.0.0.1:{runner.addresses[0][1]}"
                async with aiohttp.ClientSession() as http:
                    driver = memory.Driver(base, fake, db, http)
                    done = await _drive(driver, 0, args.warmup, args.batch)
                    points = [Point(done)]
                    for upto in (args.first, args.second):
                        done = await _drive(driver, done, upto, args.batch)
                        points.append(Point(done))
                    print(f"Services.tasks in flight at the end: {len(services.tasks)}")
                    _report(points[1], points[2], args.top)
            finally:
                await scheduler.stop(jobs)
                await runner.cleanup()
                await services.drain(30)
                await db.dispose()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=100, help="runs before the first measurement")
    p.add_argument("--first", type=int, default=500)
    p.add_argument("--second", type=int, default=1500)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=memory.CONCURRENCY,
                   help="requests in flight (fewer under tracemalloc, which slows everything)")
    p.add_argument("--top", type=int, default=15)
    asyncio.run(main(p.parse_args()))
