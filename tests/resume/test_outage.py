"""A database outage in the middle of a tool call: the result is kept, the write not repeated.

The run's database goes through a TCP proxy that the tool itself cuts, so the
outage lands exactly where it hurts: after the tool's write, before signoff
has recorded it; or during the tool's own write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import Column, MetaData, String, Table, func, insert, select, update

from resume import reap
from resume.apps import App
from resume.messages import Message, ToolCall, ToolSpec
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from resume.tools import Scope, Tool, ToolContext
from store import errors, ledger, runs, schema
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.tcp_proxy import Proxy

pytestmark = pytest.mark.postgres

meta = MetaData()
bookings = Table("test_bookings", meta, Column("key", String(200), primary_key=True),
                 Column("item", String(50), nullable=False))


class BookArgs(BaseModel):
    item: str


@pytest.fixture
async def outage(
    pg_outage: tuple[Proxy, Database, Database],
) -> tuple[Proxy, Database, Database]:
    async with pg_outage[2].write() as conn:
        await conn.run_sync(meta.create_all)
    return pg_outage


def _booking_app(book: Any) -> App:
    def script(history: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
        if not any(m.role == "tool" for m in history):
            return Message.assistant(None, [ToolCall(name="book", arguments={"item": "room"})])
        return "booked"

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    tool = Tool(name="book", description="Book an item (keyed).", args=BookArgs, execute=book,
                idempotent=True)
    return App(name="booking", tools=[tool], scope=scope, model=ScriptedModel(script))


def _booking_runtime(db: Database, book: Callable[[BookArgs, ToolContext], Awaitable[Any]],
                     **options: Any) -> tuple[Runtime, list[str]]:
    """A runtime on ``db`` whose one tool is ``book``, and the idempotency key of each call
    of it, in order (appended before ``book`` runs)."""
    calls: list[str] = []

    async def recorded(args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append(ctx.idempotency_key)
        return dict(await book(args, ctx))

    return Runtime(db=db, app=_booking_app(recorded), **options), calls


async def _write_booking(db: Database, key: str, item: str) -> None:
    """Keyed: booking again with the same key changes nothing."""
    async with db.write() as conn:
        found = (await conn.execute(select(bookings.c.key).where(bookings.c.key == key))).first()
        if found is None:
            await conn.execute(insert(bookings).values(key=key, item=item))


async def _bookings(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(bookings))).scalar_one())


async def test_outage__a_result_is_held_through_an_outage_after_the_write(
    outage: tuple[Proxy, Database, Database],
) -> None:
    proxy, through, direct = outage

    async def book(args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
        await _write_booking(through, ctx.idempotency_key, args.item)
        proxy.cut()  # the write is in; recording it is not
        asyncio.get_running_loop().call_later(1.0, proxy.restore)
        return {"booked": args.item}

    rt, calls = _booking_runtime(through, book)
    run = await journeys.start(rt, "U_REP", "book a room")

    assert proxy.refused > 0  # the outage happened
    assert run.state is RunState.answered and run.answer == "booked"
    assert run.recovery_attempts == 0  # this process recorded it; nobody had to reconcile
    assert await _bookings(direct) == 1 and len(calls) == 1
    assert [(e.tool, e.status) for e in await ledger.for_run(direct, run.id)] == [
        ("book", LedgerStatus.succeeded)]
    stored = await runs.conversation(direct, run.id)
    assert sum(1 for m in stored if m["role"] == "tool") == 1


async def test_outage__a_tool_cut_off_mid_write_is_reconciled_not_reported_as_failed(
    outage: tuple[Proxy, Database, Database],
) -> None:
    proxy, through, direct = outage

    async def book(args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
        if len(calls) == 1:  # a blip during the tool's own write, over when it gives up
            proxy.cut()
            try:
                await _write_booking(through, ctx.idempotency_key, args.item)
            finally:
                proxy.restore()
        await _write_booking(through, ctx.idempotency_key, args.item)
        return {"booked": args.item}

    rt, calls = _booking_runtime(through, book)
    with pytest.raises(errors.DatabaseUnavailable):
        await journeys.start(rt, "U_REP", "book a room")
    [run] = await runs.list_runs(direct)
    # Not a failed result for the model to shrug at: the call's outcome is unknown.
    assert run.state is RunState.running
    assert [e.status for e in await ledger.for_run(direct, run.id)] == [LedgerStatus.started]
    await runs.heartbeat(direct, run.id, run.lease_epoch,
                         now=datetime.now(UTC) - timedelta(hours=1))

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.recovered] == [run.id]
    final = await runs.get(direct, run.id)
    assert final.state is RunState.answered and final.answer == "booked"
    assert calls == [calls[0]] * 2  # called again with the same key (the tool is idempotent)
    assert await _bookings(direct) == 1
    assert [(e.tool, e.status) for e in await ledger.for_run(direct, run.id)] == [
        ("book", LedgerStatus.succeeded)]


async def test_outage__a_result_settled_by_a_taker_during_the_outage_is_not_adopted(
    outage: tuple[Proxy, Database, Database],
) -> None:
    """While this process could not write, another took the run over and settled the call:
    the held result must not be written, and this process must not carry on as the taker."""
    proxy, through, direct = outage

    async def book(args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
        await _write_booking(through, ctx.idempotency_key, args.item)
        proxy.cut()
        # What a reaper elsewhere leaves behind: a new lease, the call reconciled as done.
        async with direct.write() as conn:
            await conn.execute(update(schema.runs).where(schema.runs.c.id == ctx.run_id)
                               .values(lease_epoch=schema.runs.c.lease_epoch + 1,
                                       owner_id="proc_taker"))
            await conn.execute(update(schema.tool_calls)
                               .where(schema.tool_calls.c.run_id == ctx.run_id)
                               .values(status=LedgerStatus.succeeded.value, result="{}"))
        asyncio.get_running_loop().call_later(1.0, proxy.restore)
        return {"booked": args.item}

    rt, _ = _booking_runtime(through, book, owner_id="proc_zombie")
    run = await journeys.start(rt, "U_REP", "book a room")

    assert proxy.refused > 0
    assert run.state is RunState.running and run.owner_id == "proc_taker"
    stored = await runs.conversation(direct, run.id)
    assert not [m for m in stored if m["role"] == "tool"]  # the zombie wrote nothing
    assert (await runs.get(direct, run.id)).step == run.step
