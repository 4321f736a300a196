"""What every benchmark shares: command-line flags, machine details, tables, RESULTS.md.

A result is only comparable with the machine it ran on, so every table is
appended to ``bench/RESULTS.md`` under a header naming the CPU, the versions and
the database settings it ran with.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg  # untyped: pyproject.toml tells mypy so

RESULTS = Path(__file__).parent / "RESULTS.md"
DEFAULT_PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run, not a result")
    p.add_argument("--pg", default=DEFAULT_PG_ADMIN,
                   help="PostgreSQL admin URL; throwaway databases are created and dropped on it")
    p.add_argument("--no-pg", action="store_true", help="SQLite only")
    p.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    p.add_argument("--no-write", action="store_true", help="print, do not append to RESULTS.md")
    return p


def dialects(args: argparse.Namespace) -> list[str]:
    return [d for d, off in (("sqlite", args.no_sqlite), ("postgresql", args.no_pg)) if not off]


# --- machine ---------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def sqlite_compile_options() -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        return [row[0] for row in conn.execute("PRAGMA compile_options")]
    finally:
        conn.close()


async def postgres_details(admin_url: str) -> dict[str, str]:
    names = ("server_version", "synchronous_commit", "fsync", "shared_buffers", "wal_level",
             "full_page_writes", "work_mem", "max_connections")
    conn = await asyncpg.connect(admin_url, timeout=5)
    try:
        return {n: str(await conn.fetchval(f"SHOW {n}")) for n in names}
    finally:
        await conn.close()


async def machine_details(args: argparse.Namespace) -> str:
    lines = [
        f"- CPU: {cpu_model()} x {_cores()} ({platform.machine()}, {platform.system()} "
        f"{platform.release()})",
        f"- Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; "
        f"SQLAlchemy {_version('sqlalchemy')}; aiosqlite {_version('aiosqlite')}; "
        f"asyncpg {_version('asyncpg')}; psycopg {_version('psycopg')}; "
        f"langgraph {_version('langgraph')} (checkpoint-sqlite "
        f"{_version('langgraph-checkpoint-sqlite')}, checkpoint-postgres "
        f"{_version('langgraph-checkpoint-postgres')})",
        f"- SQLite compile options: {', '.join(sqlite_compile_options())}",
        f"- Load average at report time (1/5/15 min): "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} — other work on the machine "
        "shows up in absolute numbers; alternating sides keeps the ratios fair",
        "- SQLite settings (signoff's engine): journal_mode=WAL, synchronous=FULL, "
        "busy_timeout=30000, foreign_keys=ON, BEGIN IMMEDIATE for writes",
    ]
    if not args.no_pg:
        try:
            pg = await postgres_details(args.pg)
            lines.append("- PostgreSQL " + ", ".join(f"{k}={v}" for k, v in pg.items()))
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            lines.append(f"- PostgreSQL unreachable at {args.pg}: {exc!r}")
    return "\n".join(lines)


def _cores() -> str:
    return f"{os.cpu_count()} cores"


# --- tables and results ---------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def verdict(value: float, target: float) -> str:
    return f"{value:.2f}x ({'meets' if value <= target else 'MISSES'} <= {target}x)"


async def publish(args: argparse.Namespace, title: str, body: str) -> None:
    """Print the result and, unless --no-write, append it with the machine's details."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m bench." + Path(sys.argv[0]).stem + " " + " ".join(sys.argv[1:])
    section = (
        f"\n## {title} — {stamp}\n\n`{command.strip()}`{' (quick)' if args.quick else ''}\n\n"
        f"{await machine_details(args)}\n\n{body}\n"
    )
    print(section)
    if not args.no_write:
        if not RESULTS.exists():
            RESULTS.write_text("# Benchmark results\n\nAppended by `bench/*.py`; newest last. "
                               "See bench/README.md for what each target means.\n")
        with RESULTS.open("a") as f:
            f.write(section)


# --- timing -----------------------------------------------------------------------------


class Clock:
    """Accumulates wall time per side, so alternating sides can be summed."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {}

    def add(self, side: str, seconds: float) -> None:
        self.samples.setdefault(side, []).append(seconds)

    def total(self, side: str) -> float:
        return sum(self.samples.get(side, []))


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def now() -> float:
    return time.perf_counter()


def run(main: Any) -> None:
    asyncio.run(main)
