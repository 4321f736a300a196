"""Claims per second: signoff's store versus the raw driver, on the same schema.

Two comparisons, each at 1 and 8 concurrent clients, on SQLite and PostgreSQL:

* **same statement** — the guarded ``UPDATE runs ... WHERE id AND state='suspended'
  AND pending_token AND expires_at > now RETURNING *`` alone, in a write
  transaction: ``store.transitions.transition`` (no effects) inside ``db.write()``
  versus that SQL sent by aiosqlite / asyncpg. This is the cost of signoff's
  layers (SQLAlchemy Core, the engine's transaction handling, Run decoding).
* **full claim** — ``store.claims.claim`` with the effects a click writes
  (``resume.decide.decide``: a decision event and a card-update outbox
  row) versus the raw driver sending the same four statements signoff sends
  (the guarded UPDATE finding the run through its approval in a subquery,
  insert event, insert outbox row, record the decision with ``RETURNING``) in
  one transaction. Until 2026-11-30 both sides sent six (a lookup of the
  approval first and a re-read of it last); results before then say so.

The sides alternate batch by batch (order flipped every round), each batch on
fresh suspended runs seeded with raw SQL, so machine noise lands on all sides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiosqlite
import asyncpg  # untyped: pyproject.toml tells mypy so

from bench import common, databases
from bench.databases import Target
from store import claims, schema, transitions
from store.engine import Database
from store.states import RunState
from store.transitions import Effects

SIDES = ("raw statement", "signoff statement", "raw full claim", "signoff full claim")
OWNER = "bench-owner"

UPDATE_SQL = (
    "UPDATE runs SET state='running', owner_id=:owner, lease_epoch=lease_epoch + 1, "
    "heartbeat_at=:now, updated_at=:now, message_seq=message_seq + :nmsg, "
    "event_seq=event_seq + :nev "
    "WHERE runs.id = :run_id AND runs.state = 'suspended' AND runs.pending_token = :token "
    "AND runs.expires_at > :now RETURNING *"
)
CLAIM_SQL = (
    "UPDATE runs SET state='running', owner_id=:owner, lease_epoch=lease_epoch + 1, "
    "heartbeat_at=:now, updated_at=:now, message_seq=message_seq + :nmsg, "
    "event_seq=event_seq + :nev "
    "WHERE runs.id = (SELECT approvals.run_id FROM approvals WHERE approvals.token = :token) "
    "AND runs.state = 'suspended' AND runs.pending_token = :token "
    "AND runs.expires_at > :now RETURNING *"
)
INSERT_EVENT = ("INSERT INTO run_events (run_id, seq, kind, data, at) "
                "VALUES (:run_id, :seq, 'decision', :data, :now)")
INSERT_OUTBOX = ("INSERT INTO outbox (kind, run_id, payload, state, attempts, next_attempt_at, "
                 "created_at) VALUES ('card_update', :run_id, :payload, 'pending', 0, :now, :now)")
DECIDE = ("UPDATE approvals SET decision='approve', decided_by=:actor, decided_at=:now, "
          "reason=NULL WHERE token = :token RETURNING *")


def _pg(sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """``:name`` placeholders to asyncpg's ``$n``."""
    order: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    text = re.sub(r":(\w+)", sub, sql)
    return (text, *(params[n] for n in order))


def _decision_event(token: str, actor: str) -> dict[str, Any]:
    return {"decision": "approve", "by": actor, "call_id": "call_1", "digest": "d" * 64,
            "reason": None}


def _card_update(run_id: str, token: str, actor: str, now: datetime) -> dict[str, Any]:
    return {"run_id": run_id, "token": token, "status": "approved", "actor": actor,
            "at": now.timestamp(), "reason": None}


# --- seeding ---------------------------------------------------------------------------


async def seed(target: Target, n: int) -> list[tuple[str, str]]:
    """``n`` suspended runs with their approval rows; (run_id, token) pairs."""
    now = datetime.now(UTC)
    pairs = [(f"run_{secrets.token_hex(8)}", secrets.token_urlsafe(24)) for _ in range(n)]

    def t(value: datetime) -> Any:
        return databases.ts(target.dialect, value)

    limits = json.dumps({"max_steps": 10, "max_spend_usd": 1.0})
    pending = json.dumps({"call_id": "call_1", "tool": "send_quote", "args": {"quote_id": "Q-1"}})
    preview = json.dumps({"title": "Send quote", "fields": [["Total", "$100"]], "body": None})
    run_rows = [
        (rid, "U1", "draft a quote for Henderson", "suspended", limits, pending, tok, preview,
         "d" * 64, t(now + timedelta(hours=1)), "owner-a", 1, 1, "f" * 64, t(now), t(now))
        for rid, tok in pairs
    ]
    appr_rows = [(tok, rid, "call_1", "send_quote", "d" * 64, json.dumps({"token": tok}), t(now))
                 for rid, tok in pairs]
    run_cols = ("id, user_id, question, state, limits, pending, pending_token, pending_preview, "
                "pending_preview_digest, expires_at, owner_id, lease_epoch, snapshot_version, "
                "app_fingerprint, started_at, updated_at")
    appr_cols = "token, run_id, call_id, tool, digest, card, created_at"
    if target.dialect == "sqlite":
        conn = await databases.sqlite_raw(target.raw)
        try:
            await conn.execute("BEGIN IMMEDIATE")
            await conn.executemany(f"INSERT INTO runs ({run_cols}) VALUES ({_qs(16)})", run_rows)
            await conn.executemany(f"INSERT INTO approvals ({appr_cols}) VALUES ({_qs(7)})",
                                   appr_rows)
            await conn.execute("COMMIT")
        finally:
            await conn.close()
    else:
        pg = await asyncpg.connect(target.raw)
        try:
            async with pg.transaction():
                await pg.copy_records_to_table("runs", records=run_rows,
                                               columns=[c.strip() for c in run_cols.split(",")])
                await pg.copy_records_to_table("approvals", records=appr_rows,
                                               columns=[c.strip() for c in appr_cols.split(",")])
        finally:
            await pg.close()
    return pairs


def _qs(n: int) -> str:
    return ", ".join("?" * n)


# --- the four sides -----------------------------------------------------------------------

Claim = Callable[[str, str], Awaitable[bool]]


class RawSqlite:
    def __init__(self, conns: list[aiosqlite.Connection]) -> None:
        self.free: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        for c in conns:
            self.free.put_nowait(c)

    async def _tx(self, body: Callable[[aiosqlite.Connection], Awaitable[bool]]) -> bool:
        conn = await self.free.get()
        try:
            await conn.execute("BEGIN IMMEDIATE")
            try:
                ok = await body(conn)
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")
            return ok
        finally:
            self.free.put_nowait(conn)

    async def statement(self, run_id: str, token: str) -> bool:
        now = databases.sqlite_ts(datetime.now(UTC))

        async def body(conn: aiosqlite.Connection) -> bool:
            params = {"owner": OWNER, "now": now, "nmsg": 0, "nev": 0, "run_id": run_id,
                      "token": token}
            async with conn.execute(UPDATE_SQL, params) as cur:
                return await cur.fetchone() is not None

        return await self._tx(body)

    async def full(self, run_id: str, token: str) -> bool:
        at = datetime.now(UTC)
        now = databases.sqlite_ts(at)

        async def body(conn: aiosqlite.Connection) -> bool:
            params = {"owner": OWNER, "now": now, "nmsg": 0, "nev": 1, "token": token}
            async with conn.execute(CLAIM_SQL, params) as cur:
                row = await cur.fetchone()
            if row is None:
                return False
            seq = row[list(schema.runs.c.keys()).index("event_seq")]
            data = json.dumps(_decision_event(token, "U2"), separators=(",", ":"))
            payload = json.dumps(_card_update(run_id, token, "U2", at), separators=(",", ":"))
            await conn.execute(INSERT_EVENT, {"run_id": run_id, "seq": seq, "data": data,
                                              "now": now})
            await conn.execute(INSERT_OUTBOX, {"run_id": run_id, "payload": payload, "now": now})
            async with conn.execute(DECIDE, {"actor": "U2", "now": now, "token": token}) as cur:
                await cur.fetchone()
            return True

        return await self._tx(body)


class RawPostgres:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def statement(self, run_id: str, token: str) -> bool:
        stmt = _pg(UPDATE_SQL, {"owner": OWNER, "now": datetime.now(UTC), "nmsg": 0, "nev": 0,
                                "run_id": run_id, "token": token})
        async with self.pool.acquire() as conn, conn.transaction():
            return await conn.fetchrow(*stmt) is not None

    async def full(self, run_id: str, token: str) -> bool:
        now = datetime.now(UTC)
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(*_pg(CLAIM_SQL, {
                "owner": OWNER, "now": now, "nmsg": 0, "nev": 1, "token": token}))
            if row is None:
                return False
            data = json.dumps(_decision_event(token, "U2"), separators=(",", ":"))
            payload = json.dumps(_card_update(run_id, token, "U2", now), separators=(",", ":"))
            await conn.execute(*_pg(INSERT_EVENT, {"run_id": run_id, "seq": row["event_seq"],
                                                   "data": data, "now": now}))
            await conn.execute(*_pg(INSERT_OUTBOX, {"run_id": run_id, "payload": payload,
                                                    "now": now}))
            await conn.fetchrow(*_pg(DECIDE, {"actor": "U2", "now": now, "token": token}))
            return True


class Signoff:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def statement(self, run_id: str, token: str) -> bool:
        t = schema.runs
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            run = await transitions.transition(
                conn, run_id=run_id,
                where=[transitions.state_is(RunState.suspended), t.c.pending_token == token,
                       t.c.expires_at > now],
                values={"state": RunState.running.value, "owner_id": OWNER,
                        "lease_epoch": t.c.lease_epoch + 1, "heartbeat_at": now},
                fx=Effects(), now=now, action="claim",
            )
        return run is not None

    async def full(self, run_id: str, token: str) -> bool:
        now = datetime.now(UTC)
        fx = Effects(events=[("decision", _decision_event(token, "U2"))],
                     outbox=[("card_update", _card_update(run_id, token, "U2", now))])
        result = await claims.claim(self.db, token, decision="approve", actor="U2", reason=None,
                                    owner_id=OWNER, now=now, fx=fx)
        return isinstance(result, claims.ClaimWon)


# --- measurement --------------------------------------------------------------------------


async def batch(claim: Claim, pairs: list[tuple[str, str]], clients: int) -> float:
    """Claim every pair with ``clients`` concurrent workers; wall seconds."""
    todo = iter(pairs)

    async def worker() -> None:
        for run_id, token in todo:
            if not await claim(run_id, token):
                raise RuntimeError(f"claim of {run_id} lost: the benchmark is miscounting")

    start = common.now()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return common.now() - start


async def measure(target: Target, clients: int, rounds: int, size: int) -> dict[str, float]:
    warm = 20
    pairs = await seed(target, len(SIDES) * (rounds * size + warm))
    db = target.connect()
    if target.dialect == "sqlite":
        conns = [await databases.sqlite_raw(target.raw) for _ in range(clients)]
        raw: RawSqlite | RawPostgres = RawSqlite(conns)
        pool = None
    else:
        pool = await asyncpg.create_pool(target.raw, min_size=clients, max_size=clients)
        raw = RawPostgres(pool)
    sig = Signoff(db)
    fns: dict[str, Claim] = {SIDES[0]: raw.statement, SIDES[1]: sig.statement,
                             SIDES[2]: raw.full, SIDES[3]: sig.full}
    clock = common.Clock()
    try:
        for side in SIDES:
            await batch(fns[side], [pairs.pop() for _ in range(warm)], clients)
        for r in range(rounds):
            order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                clock.add(side, await batch(fns[side], [pairs.pop() for _ in range(size)],
                                            clients))
    finally:
        await db.dispose()
        if pool is not None:
            await pool.close()
        else:
            for c in conns:
                await c.close()
    return {side: rounds * size / clock.total(side) for side in SIDES}


async def main(args: argparse.Namespace) -> None:
    rounds, size = (2, 100) if args.quick else (args.rounds, args.batch)
    rows: list[list[Any]] = []
    misses: list[str] = []
    for dialect in common.dialects(args):
        for clients in (1, 8):
            async with databases.fresh(dialect, args.pg) as target:
                rate = await measure(target, clients, rounds, size)
            same = rate[SIDES[0]] / rate[SIDES[1]]
            full = rate[SIDES[2]] / rate[SIDES[3]]
            print(f"{dialect} x{clients}: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in rate.items()))
            rows.append([dialect, clients, *(round(rate[s]) for s in SIDES),
                         common.verdict(same, 1.5), common.verdict(full, 1.5),
                         f"{rate[SIDES[0]] / rate[SIDES[3]]:.2f}x"])
            if same > 1.5 or full > 1.5:
                misses.append(f"{dialect} x{clients}")
    headers = ["database", "clients", *(f"{s} /s" for s in SIDES),
               "overhead, same statement", "overhead, full claim",
               "raw statement / signoff full claim"]
    body = (
        f"{rounds} rounds x {size} claims per side, sides alternated; overhead = raw rate / "
        "signoff rate (target <= 1.5x). 'full claim' is store.claims.claim with a decision "
        "event and a card-update outbox row, against the raw driver sending the same four "
        "statements signoff sends; the last column is what a click costs end to end in the "
        "store compared with the bare UPDATE.\n\n" + common.table(headers, rows)
    )
    if misses:
        body += f"\n\nMisses: {', '.join(misses)}."
    await common.publish(args, "Claim throughput", body)


if __name__ == "__main__":
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--batch", type=int, default=250, help="claims per side per round")
    common.run(main(p.parse_args()))
