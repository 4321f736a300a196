from __future__ import annotations

import pytest
from sqlalchemy import func, select

from store import errors, runs, schema
from store.engine import Database
from store.records import MAX_MESSAGE_BYTES
from store.transitions import Effects
from tests.store.factories import make_run, utcnow

TRICKY = "Grüße — 日本語 \u0000 nul, emoji 🧾, quote \" and backslash \\"


async def _count(db: Database, run_id: str) -> int:
    m = schema.run_messages
    async with db.read() as conn:
        return int((await conn.execute(
            select(func.count()).select_from(m).where(m.c.run_id == run_id))).scalar_one())


async def test_messages__append_writes_one_row_and_loads_in_order(db: Database) -> None:
    run = await make_run(db)
    for i in range(499):
        run = await runs.record_step(
            db, run.id, run.lease_epoch, now=utcnow(), steps=1,
            fx=Effects(messages=[{"role": "assistant", "content": f"{i} {TRICKY}"}]),
        )
    assert await _count(db, run.id) == 500
    await runs.record_step(
        db, run.id, run.lease_epoch, now=utcnow(),
        fx=Effects(messages=[{"role": "assistant", "content": "the 501st"}]),
    )
    assert await _count(db, run.id) == 501
    loaded = await runs.conversation(db, run.id)
    assert loaded[0]["content"] == run.question
    assert [m["content"] for m in loaded[1:500]] == [f"{i} {TRICKY}" for i in range(499)]
    assert loaded[-1]["content"] == "the 501st"


async def test_messages__oversized_message_is_refused_and_nothing_written(db: Database) -> None:
    run = await make_run(db)
    huge = {"role": "assistant", "content": "x" * (MAX_MESSAGE_BYTES + 1)}
    with pytest.raises(errors.PayloadTooLarge, match="message is"):
        await runs.record_step(db, run.id, run.lease_epoch, now=utcnow(), steps=1,
                               fx=Effects(messages=[huge], events=[("step", {})]))
    after = await runs.get(db, run.id)
    assert after.step == 0 and after.message_seq == run.message_seq
    assert await _count(db, run.id) == 1


async def test_messages__unserialisable_payload_is_refused(db: Database) -> None:
    run = await make_run(db)
    with pytest.raises(errors.NotSerializable, match="event 'x' data"):
        await runs.record_step(db, run.id, run.lease_epoch, now=utcnow(), steps=1,
                               fx=Effects(events=[("x", {"when": object()})]))
    assert (await runs.get(db, run.id)).step == 0


async def test_runs__unknown_id_is_a_named_error(db: Database) -> None:
    with pytest.raises(errors.RunNotFound, match="run_nope"):
        await runs.get(db, "run_nope")
