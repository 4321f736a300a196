"""Persisting step k of a conversation: signoff versus LangGraph's checkpointer.

Each step appends one ~2 KB assistant message. signoff: ``store.runs.record_step``
with that message (one guarded UPDATE of the run plus one INSERT into
``run_messages``, one transaction). LangGraph: a one-node ``StateGraph`` whose
state is ``messages: Annotated[list, add_messages]``; the node returns the same
message and the graph runs with ``durability="sync"`` on ``AsyncSqliteSaver``
(aiosqlite, WAL, synchronous=FULL, as signoff) or ``AsyncPostgresSaver``
(psycopg). Both sides advance one step at a time, alternating which goes first.

Reported at k = 10, 100, 500, 1000: the median time of the steps just before k,
and bytes on disk (SQLite file + WAL; PostgreSQL pg_total_relation_size of the
tables each side writes) against the conversation's raw size (the messages as
JSON text).
"""

from __future__ import annotations

import argparse
import random
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

import aiosqlite
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from bench import common, databases
from bench.databases import Target
from store import records, runs, schema
from store.engine import Database
from store.transitions import Effects

MESSAGE_BYTES = 2048
LANGGRAPH_PG_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes",
                       "checkpoint_migrations"]
_WORDS = ("the quote for Henderson covers two hundred units of SKU-4411 at the tier two "
          "discount with delivery in March pending credit review and the customer asked "
          "whether freight is included so I checked the contract terms").split()


def message_text(i: int) -> str:
    """A distinct ~2 KB of prose-like text (compresses like prose, not like 'aaaa')."""
    rng = random.Random(i)
    words: list[str] = []
    size = 0
    while size < MESSAGE_BYTES:
        w = rng.choice(_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:MESSAGE_BYTES]


def signoff_message(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": message_text(i)}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


Step = Callable[[int], Awaitable[None]]


class SignoffSide:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.run_id = ""
        self.epoch = 0

    async def start(self) -> None:
        now = datetime.now(UTC)
        new = runs.NewRun(id=f"run_{uuid.uuid4().hex[:16]}", user_id="U1", question="bench",
                          limits={"max_steps": 10_000}, owner_id="bench",
                          snapshot_version=1, app_fingerprint="f" * 64)
        run = await runs.create(self.db, new, now=now, fx=Effects())
        self.run_id, self.epoch = run.id, run.lease_epoch

    async def step(self, i: int) -> None:
        await runs.record_step(self.db, self.run_id, self.epoch, now=datetime.now(UTC),
                               fx=Effects(messages=[signoff_message(i)]), steps=1)


class LangGraphSide:
    def __init__(self, saver: Any) -> None:
        self.index = 0
        builder = StateGraph(State)
        builder.add_node("model", self._node)
        builder.add_edge(START, "model")
        builder.add_edge("model", END)
        self.graph = builder.compile(checkpointer=saver)
        self.config: Any = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex[:8]}"}}

    def _node(self, state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content=message_text(self.index), id=f"m{self.index}")]}

    async def step(self, i: int) -> None:
        self.index = i
        await self.graph.ainvoke({"messages": []}, self.config, durability="sync")


WARMUP = 10


def _window(k: int) -> range:
    w = min(50, max(10, k // 5))
    return range(k - w + 1, k + 1)


async def _warm(sig: SignoffSide, saver: Any) -> None:
    """Warm statement caches and connections on a separate run / thread (tiny messages)."""
    await sig.start()
    lg = LangGraphSide(saver)
    for i in range(WARMUP):
        await sig.step(-1 - i)
        await lg.step(-1 - i)


async def _fresh_at_ten(db: Database) -> SignoffSide:
    """A new run with 9 messages (untimed), so the next step is its step 10."""
    side = SignoffSide(db)
    await side.start()
    for i in range(1, 10):
        await side.step(i)
    return side


async def measure(dialect: str, args: argparse.Namespace, ks: list[int]) -> list[list[Any]]:
    async with databases.fresh(dialect, args.pg) as sig_target, \
            databases.fresh(dialect, args.pg, migrated=False) as lg_target, \
            databases.fresh(dialect, args.pg) as ref_target:
        db, ref_db = sig_target.connect(), ref_target.connect()
        try:
            async with _saver(lg_target) as saver:
                return await _grow(dialect, ks, Sides(sig_target, lg_target, db, ref_db, saver))
        finally:
            await db.dispose()
            await ref_db.dispose()


class Sides:
    def __init__(self, sig_target: Target, lg_target: Target, db: Database, ref_db: Database,
                 saver: Any) -> None:
        self.sig_target, self.lg_target = sig_target, lg_target
        self.sig, self.ref_db, self.saver = SignoffSide(db), ref_db, saver
        self.lg = LangGraphSide(saver)  # replaced after the warm-up by the measured thread
        self.times: dict[str, dict[int, float]] = {"signoff": {}, "langgraph": {}, "ref": {}}

    async def timed_step(self, i: int, timed_windows: set[int]) -> None:
        """Step ``i`` on both sides; inside a reporting window also a step 10 on a fresh run."""
        ref = await _fresh_at_ten(self.ref_db) if i in timed_windows else None
        steps: dict[str, Step] = {"signoff": self.sig.step, "langgraph": self.lg.step}
        if ref is not None:
            steps["ref"] = ref.step
        names = list(steps)
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            start = common.now()
            await steps[name](10 if name == "ref" else i)
            self.times[name][i] = common.now() - start

    def ms(self, name: str, k: int) -> float:
        return common.median([self.times[name][j] for j in _window(k)]) * 1000


async def _grow(dialect: str, ks: list[int], s: Sides) -> list[list[Any]]:
    await _warm(s.sig, s.saver)
    await s.sig.start()
    s.lg = LangGraphSide(s.saver)
    await _checkpoint(s.sig_target, s.lg_target)
    empty_sig = await _data_bytes(s.sig_target, None)
    empty_lg = await _data_bytes(s.lg_target, LANGGRAPH_PG_TABLES)
    windows = {j for k in ks for j in _window(k)}
    rows: list[list[Any]] = []
    raw = 0
    for i in range(1, max(ks) + 1):
        raw += len(records.dumps(signoff_message(i), what="message").encode())
        await s.timed_step(i, windows)
        if i not in ks:
            continue
        found = (await _bytes(s.sig_target, None),
                 await _bytes(s.lg_target, LANGGRAPH_PG_TABLES))
        await _checkpoint(s.sig_target, s.lg_target)
        sb = await _data_bytes(s.sig_target, None) - empty_sig
        lb = await _data_bytes(s.lg_target, LANGGRAPH_PG_TABLES) - empty_lg
        t_sig, t_ref = s.ms("signoff", i), s.ms("ref", i)
        rows.append([dialect, i, t_sig, t_ref, f"{t_sig / t_ref:.2f}x", s.ms("langgraph", i),
                     raw // 1024, found[0] // 1024, sb // 1024, f"{sb / raw:.2f}x",
                     found[1] // 1024, lb // 1024, f"{lb / raw:.2f}x"])
        print(rows[-1], flush=True)
    return rows


async def _bytes(target: Target, tables: list[str] | None) -> int:
    if target.path is not None:
        return databases.sqlite_bytes(target.path)
    names = tables or [t.name for t in schema.metadata.sorted_tables] + ["alembic_version"]
    return await databases.pg_relation_bytes(target.raw, names)


async def _checkpoint(*targets: Target) -> None:
    """Fold SQLite's WAL into the main file (outside the timed steps), as auto-checkpoint
    would; the WAL file keeps its size (no TRUNCATE) so later commits do not pay to regrow it."""
    for target in targets:
        if target.path is not None:
            async with aiosqlite.connect(target.raw) as conn:
                await conn.execute("PRAGMA wal_checkpoint(FULL)")


async def _data_bytes(target: Target, tables: list[str] | None) -> int:
    if target.path is not None:
        return target.path.stat().st_size  # main file, just checkpointed
    return await _bytes(target, tables)


class _saver:
    """The LangGraph checkpointer for ``target``, set up as signoff's database is."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._close: Callable[[], Awaitable[None]] | None = None

    async def __aenter__(self) -> Any:
        if self.target.dialect == "sqlite":
            conn = await aiosqlite.connect(self.target.raw)
            saver: Any = AsyncSqliteSaver(conn)
            await saver.setup()  # sets journal_mode=WAL
            await conn.execute("PRAGMA synchronous=FULL")
            self._close = conn.close
            return saver
        cm = AsyncPostgresSaver.from_conn_string(self.target.raw)
        saver = await cm.__aenter__()
        await saver.setup()

        async def close() -> None:
            await cm.__aexit__(None, None, None)

        self._close = close
        return saver

    async def __aexit__(self, *exc: object) -> None:
        if self._close is not None:
            await self._close()


async def main(args: argparse.Namespace) -> None:
    ks = [10, 100] if args.quick else [k for k in (10, 100, 500, 1000) if k <= args.max_k]
    rows: list[list[Any]] = []
    for dialect in common.dialects(args):
        rows += await measure(dialect, args, ks)
    headers = ["database", "step k", "signoff ms/step", "signoff step 10, same moment",
               "k / 10", "LangGraph ms/step", "raw KiB", "signoff KiB as found", "signoff KiB",
               "signoff / raw", "LangGraph KiB as found", "LangGraph KiB", "LangGraph / raw"]
    notes = []
    for dialect in common.dialects(args):
        mine = {r[1]: r for r in rows if r[0] == dialect}
        lo, hi = min(mine), max(mine)
        paired = mine[hi][2] / mine[hi][3]
        apart = mine[hi][2] / mine[lo][2]
        notes.append(f"- {dialect}: signoff step {hi} / step 10 measured side by side = "
                     f"{common.verdict(paired, 1.5)} (step {hi} vs the step-{lo} window measured "
                     f"earlier: {apart:.2f}x); signoff's data at step {hi} = {mine[hi][9]} the "
                     f"raw conversation (target <= 3x); LangGraph's {mine[hi][12]}")
    body = (
        "Median wall time of the steps just before k (the last min(50, max(10, k/5)) steps), "
        f"each step one ~{MESSAGE_BYTES} B assistant message; sides alternate every step. "
        f"Before measuring, {WARMUP} tiny warm-up steps on a separate run / thread. "
        "'signoff step 10, same moment': interleaved with each step of the window, a step "
        "10 on a fresh run (9 untimed steps before it) in a third database of the same "
        "dialect, so the k / 10 ratio is measured under the same machine load. "
        "Bytes 'as found': SQLite main file + WAL (the WAL holds up to ~1000 pages of "
        "recent commits until SQLite's auto-checkpoint, so it dominates small databases); "
        "PostgreSQL pg_total_relation_size (heap + TOAST + indexes) of each side's tables. "
        "'KiB' and '/ raw' columns: the SQLite main file after a WAL checkpoint (outside the "
        "timings), or the same PostgreSQL relation sizes, minus their size before step 1 "
        "(schema + warm-up): what this conversation added.\n\n"
        + common.table(headers, rows) + "\n\n" + "\n".join(notes)
    )
    await common.publish(args, "Step persistence versus conversation length", body)


if __name__ == "__main__":
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--max-k", type=int, default=1000, help="longest conversation to reach")
    common.run(main(p.parse_args()))
