"""Expiry and orphan sweeps with 1,000 versus 1,000,000 retained runs.

Each database holds N runs: 98.9% terminal (answered / failed), 1% suspended,
0.1% running, bulk-inserted with one ``INSERT ... SELECT`` (a recursive CTE on
SQLite, ``generate_series`` on PostgreSQL). Before every timed sweep the same
small result set is re-armed outside the timing: 5 suspended runs past
``expires_at`` and 1 running run with a stale heartbeat. Timed, alternating the
small and the large database every round:

* ``store.sweeps.expire_due`` moving the 5 due runs (with an event and two
  outbox rows each, as the runtime writes), then again with nothing due;
* ``store.sweeps.take_over_orphans`` taking over the 1 stale run, then again
  with nothing stale.

The candidate queries' plans are printed (SQLite ``EXPLAIN QUERY PLAN``;
PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)``) for the large database.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg  # untyped: pyproject.toml tells mypy so
from sqlalchemy import Select
from sqlalchemy.dialects import postgresql, sqlite

from bench import common, databases
from bench.databases import Target
from store import sweeps
from store.engine import Database
from store.records import Run
from store.transitions import Effects

DUE = 5  # suspended runs past expires_at, re-armed before each expiry sweep
STALE = 1  # running runs with a stale heartbeat (the 1k database has only one running run)
ORPHAN_AFTER = timedelta(seconds=90)

_SELECT = """
SELECT 'r' || x,
       'U' || (x % 50),
       'what is the quote for order ' || x,
       CASE WHEN x % 1000 = 0 THEN 'running'
            WHEN x % 1000 <= 10 THEN 'suspended'
            WHEN x % 3 = 0 THEN 'failed'
            ELSE 'answered' END,
       '{{"max_steps": 10}}',
       CASE WHEN x % 1000 BETWEEN 1 AND 10 THEN 'tok' || x END,
       CASE WHEN x % 1000 BETWEEN 1 AND 10 THEN :future END,
       CASE WHEN x % 1000 = 0 THEN :fresh END,
       CASE WHEN x % 1000 = 0 THEN 'owner-a' END,
       1, 1, 'ffff', :started, :started
FROM {source}
"""
_COLUMNS = ("id, user_id, question, state, limits, pending_token, expires_at, heartbeat_at, "
            "owner_id, lease_epoch, snapshot_version, app_fingerprint, started_at, updated_at")


def _due_ids() -> list[str]:
    return [f"r{x}" for x in range(1, DUE + 1)]


def _stale_ids() -> list[str]:
    return [f"r{1000 * x}" for x in range(1, STALE + 1)]


async def build(target: Target, n: int) -> float:
    """Bulk-insert ``n`` runs; seconds taken."""
    now = datetime.now(UTC)
    params = {"future": now + timedelta(days=1), "fresh": now + timedelta(days=1),
              "started": now - timedelta(days=2)}
    start = common.now()
    if target.dialect == "sqlite":
        source = "c"
        sql = (f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
               f"INSERT INTO runs ({_COLUMNS}) " + _SELECT.format(source=source))
        conn = await databases.sqlite_raw(target.raw)
        try:
            await conn.execute("BEGIN IMMEDIATE")
            await conn.execute(sql, {k: databases.sqlite_ts(v) for k, v in params.items()})
            await conn.execute("COMMIT")
        finally:
            await conn.close()
    else:
        sql = (f"INSERT INTO runs ({_COLUMNS}) "
               + _SELECT.format(source=f"generate_series(1, {n}) AS x")
               .replace(":future", "$1::timestamptz").replace(":fresh", "$2::timestamptz")
               .replace(":started", "$3::timestamptz").replace("'r' || x", "'r' || x::text"))
        pg = await asyncpg.connect(target.raw)
        try:
            await pg.execute(sql, params["future"], params["fresh"], params["started"])
            await pg.execute("VACUUM ANALYZE runs")  # what autovacuum does after a bulk load
        finally:
            await pg.close()
    return common.now() - start


async def arm(target: Target, now: datetime) -> None:
    """Re-create the small result set: DUE expired suspensions and STALE orphans."""
    past = databases.ts(target.dialect, now - timedelta(minutes=5))
    due, stale = _due_ids(), _stale_ids()
    expire = ("UPDATE runs SET state='suspended', halt_reason=NULL, expires_at={p} "
              "WHERE id IN ({ids})")
    orphan = ("UPDATE runs SET state='running', recovery_attempts=0, heartbeat_at={p} "
              "WHERE id IN ({ids})")
    if target.dialect == "sqlite":
        conn = await databases.sqlite_raw(target.raw)
        try:
            await conn.execute("BEGIN IMMEDIATE")
            await conn.execute(expire.format(p="?", ids=",".join("?" * len(due))), [past, *due])
            await conn.execute(orphan.format(p="?", ids=",".join("?" * len(stale))),
                               [past, *stale])
            await conn.execute("COMMIT")
        finally:
            await conn.close()
        return
    pg = await asyncpg.connect(target.raw)
    try:
        await pg.execute(expire.format(p="$1", ids="SELECT unnest($2::text[])"), past, due)
        await pg.execute(orphan.format(p="$1", ids="SELECT unnest($2::text[])"), past, stale)
    finally:
        await pg.close()


def _expired_effects(run: Run) -> Effects:
    return Effects(
        events=[("expired", {"token": run.pending_token})],
        outbox=[("card_update", {"run_id": run.id, "token": run.pending_token,
                                 "status": "expired", "actor": None, "at": 0.0, "reason": None}),
                ("run_notice", {"run_id": run.id, "requester": run.user_id,
                                "event": "expired", "reason": "suspension_expired"})],
    )


def _taken_effects(run: Run) -> Effects:
    return Effects(events=[("recovered", {"attempt": run.recovery_attempts + 1})])


def _exhausted_effects(run: Run) -> Effects:
    return Effects(events=[("failed", {"reason": "recovery_exhausted"})],
                   outbox=[("run_notice", {"run_id": run.id, "event": "failed"})])


async def sweep_once(db: Database, target: Target) -> dict[str, float]:
    """One armed expiry + orphan sweep and one empty of each; seconds per kind."""
    now = datetime.now(UTC)
    await arm(target, now)
    out: dict[str, float] = {}
    start = common.now()
    expired = await sweeps.expire_due(db, now=now, effects_for=_expired_effects)
    out["expire 5 due"] = common.now() - start
    start = common.now()
    empty = await sweeps.expire_due(db, now=now, effects_for=_expired_effects)
    out["expire, none due"] = common.now() - start
    start = common.now()
    taken = await sweeps.take_over_orphans(
        db, now=now, stale_before=now - ORPHAN_AFTER, owner_id="sweeper", max_attempts=2,
        exhausted_effects=_exhausted_effects, taken_effects=_taken_effects)
    out[f"take over {STALE} orphan"] = common.now() - start
    start = common.now()
    none = await sweeps.take_over_orphans(
        db, now=now, stale_before=now - ORPHAN_AFTER, owner_id="sweeper", max_attempts=2,
        exhausted_effects=_exhausted_effects, taken_effects=_taken_effects)
    out["orphans, none stale"] = common.now() - start
    if (len(expired), len(empty), len(taken.taken), len(none.taken)) != (DUE, 0, STALE, 0):
        raise RuntimeError("sweep moved the wrong number of runs: the fixture is wrong")
    return out


async def plans(target: Target) -> str:
    """The candidate queries' plans, as the store issues them (locking clause included)."""
    now = datetime.now(UTC)
    queries: list[tuple[str, Select[Any]]] = [
        ("expiry candidates", sweeps.expiry_candidates(now, 100)),
        ("orphan candidates", sweeps.orphan_candidates(now - ORPHAN_AFTER, 50)),
    ]
    out: list[str] = []
    for name, stmt in queries:
        if target.dialect == "sqlite":
            compiled = stmt.compile(dialect=sqlite.dialect())
            args = [databases.ts("sqlite", v) if isinstance(v, datetime) else v
                    for v in (compiled.params[k] for k in compiled.positiontup or [])]
            conn = await databases.sqlite_raw(target.raw)
            try:
                async with conn.execute("EXPLAIN QUERY PLAN " + str(compiled), args) as cur:
                    lines = [str(r[3]) for r in await cur.fetchall()]
            finally:
                await conn.close()
        else:
            stmt = stmt.with_for_update(skip_locked=True)
            compiled = stmt.compile(
                dialect=postgresql.asyncpg.dialect()  # type: ignore[no-untyped-call]  # SA's
            )
            args = [compiled.params[k] for k in compiled.positiontup or []]
            pg = await asyncpg.connect(target.raw)
            try:
                async with pg.transaction():
                    rows = await pg.fetch("EXPLAIN (ANALYZE, BUFFERS) " + str(compiled), *args)
                    lines = [r[0] for r in rows]
            finally:
                await pg.close()
        out.append(f"{name}:\n\n```\n{compiled}\n--\n" + "\n".join(lines) + "\n```")
    return "\n\n".join(out)


async def measure(dialect: str, args: argparse.Namespace, rounds: int) -> tuple[list[Any], str]:
    sizes = (args.small, args.large)
    async with databases.fresh(dialect, args.pg) as small, \
            databases.fresh(dialect, args.pg) as large:
        targets = {args.small: small, args.large: large}
        built = {n: await build(targets[n], n) for n in sizes}
        print(f"{dialect}: built " + ", ".join(f"{n:,} runs in {s:.1f}s" for n, s in built.items()),
              flush=True)
        dbs = {n: targets[n].connect() for n in sizes}
        try:
            for n in sizes:  # warm-up
                await sweep_once(dbs[n], targets[n])
            samples: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
            for r in range(rounds):
                for n in sizes if r % 2 == 0 else tuple(reversed(sizes)):
                    samples[n].append(await sweep_once(dbs[n], targets[n]))
            await arm(large, datetime.now(UTC))  # so the plans show the armed rows found
            plan = await plans(large)
        finally:
            for db in dbs.values():
                await db.dispose()
    rows = []
    for kind in samples[args.small][0]:
        med = {n: common.median([s[kind] for s in samples[n]]) * 1000 for n in sizes}
        p90 = {n: common.percentile([s[kind] for s in samples[n]], 90) * 1000 for n in sizes}
        rows.append([dialect, kind, med[args.small], p90[args.small], med[args.large],
                     p90[args.large], common.verdict(med[args.large] / med[args.small], 2.0)])
    build_note = ", ".join(f"{n:,} runs built in {s:.1f}s" for n, s in built.items())
    return rows, f"### {dialect}: plans on the {args.large:,}-run database ({build_note})\n\n{plan}"


async def main(args: argparse.Namespace) -> None:
    rounds = 10 if args.quick else args.rounds
    rows: list[list[Any]] = []
    plan_sections: list[str] = []
    for dialect in common.dialects(args):
        r, p = await measure(dialect, args, rounds)
        rows += r
        plan_sections.append(p)
        print(common.table(["db", "sweep", "small ms", "p90", "large ms", "p90", "ratio"], r))
    headers = ["database", "sweep", f"{args.small:,} runs median ms", "p90 ms",
               f"{args.large:,} runs median ms", "p90 ms", "large / small (median)"]
    body = (
        f"{rounds} rounds per size, sizes alternated. Runs: 98.9% terminal, 1% suspended, "
        f"0.1% running; before each round {DUE} suspensions are made due and {STALE} run's "
        "heartbeat stale (outside the timing). SQLite is not ANALYZEd (signoff never runs "
        "ANALYZE); PostgreSQL is VACUUM ANALYZEd after the bulk load, as autovacuum would.\n\n"
        + common.table(headers, rows) + "\n\n" + "\n\n".join(plan_sections)
    )
    await common.publish(args, f"Sweeps at {args.small:,} vs {args.large:,} runs", body)


if __name__ == "__main__":
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=1_000)
    p.add_argument("--large", type=int, default=1_000_000,
                   help="retained runs in the large database (100000 when short of time)")
    p.add_argument("--rounds", type=int, default=30)
    common.run(main(p.parse_args()))
