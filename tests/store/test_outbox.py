"""The outbox: due rows are leased once, delivered in order per run, retried, given up on."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from store import outbox, runs
from store.engine import Database
from store.records import OutboxRow, Run
from store.states import OutboxState
from store.transitions import Effects
from tests.store.factories import make_run, make_suspended

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


async def _enqueue(db: Database, run: Run, *payloads: dict[str, Any], now: datetime = T0) -> Run:
    """Enqueue ``payloads`` the way the domain does: inside one run transition."""
    return await runs.record_step(
        db, run.id, run.lease_epoch, now=now,
        fx=Effects(outbox=[("run_notice", p) for p in payloads]),
    )


async def _pick(db: Database, now: datetime, limit: int = 20) -> list[OutboxRow]:
    return await outbox.pick_due(db, now=now, limit=limit, lease=LEASE)


async def test_pick_due__row_enqueued_by_a_transition_is_picked_once(db: Database) -> None:
    run, token = await make_suspended(db, now=T0)

    picked = await _pick(db, T0)

    assert [(r.run_id, r.kind, r.payload) for r in picked] == [
        (run.id, "approval_card", {"token": token})
    ]
    assert picked[0].attempts == 1 and picked[0].state is OutboxState.pending
    assert await _pick(db, T0) == []
    await outbox.mark_sent(db, picked[0].id, now=T0 + timedelta(seconds=1))
    assert await _pick(db, T0 + 10 * LEASE) == []
    [row] = await outbox.for_run(db, run.id)
    assert row.state is OutboxState.sent and row.sent_at == T0 + timedelta(seconds=1)
    assert row.attempts == 1 and row.last_error is None


async def test_pick_due__rows_not_yet_due_are_left(db: Database) -> None:
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1}, now=T0 + timedelta(minutes=5))

    assert await _pick(db, T0 + timedelta(minutes=5) - timedelta(microseconds=1)) == []
    assert [r.payload for r in await _pick(db, T0 + timedelta(minutes=5))] == [{"n": 1}]


async def test_pick_due__concurrent_pickers_never_share_a_row(db: Database) -> None:
    run_ids: list[str] = []
    expected: set[int] = set()
    for r in range(10):
        run = await make_run(db, now=T0)
        await _enqueue(db, run, *({"run": r, "n": n} for n in range(5)))
        run_ids.append(run.id)
        expected |= {row.id for row in await outbox.for_run(db, run.id)}
    assert len(expected) == 50

    delivered: list[OutboxRow] = []

    async def deliverer() -> None:
        for _ in range(500):
            if len(delivered) == 50:
                return
            picked = await _pick(db, T0, limit=3)
            delivered.extend(picked)
            for row in picked:
                await outbox.mark_sent(db, row.id, now=T0)
            if not picked:
                await asyncio.sleep(0)  # let the others mark their rows sent
        raise AssertionError(f"deliverers stalled after {len(delivered)} of 50 rows")

    await asyncio.gather(*(deliverer() for _ in range(5)))

    ids = [row.id for row in delivered]
    assert len(ids) == len(set(ids)), "a row was picked by two deliverers"
    assert set(ids) == expected
    for run_id in run_ids:
        per_run = [row for row in delivered if row.run_id == run_id]
        assert [row.payload["n"] for row in per_run] == [0, 1, 2, 3, 4]
    assert all(row.attempts == 1 for row in delivered)
    assert await outbox.counts(db) == {"sent": 50}


async def test_pick_due__one_round_of_concurrent_pickers_takes_each_run_head_once(
    db: Database,
) -> None:
    heads: set[int] = set()
    for r in range(10):
        run = await make_run(db, now=T0)
        await _enqueue(db, run, *({"run": r, "n": n} for n in range(5)))
        heads.add((await outbox.for_run(db, run.id))[0].id)

    rounds = await asyncio.gather(*(_pick(db, T0, limit=20) for _ in range(5)))

    ids = [row.id for picked in rounds for row in picked]
    assert len(ids) == len(set(ids)), "a row was picked by two pickers"
    assert set(ids) == heads, "only the first row of each run may go out"


async def test_pick_due__later_row_waits_for_an_earlier_row_in_backoff(db: Database) -> None:
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1}, {"n": 2})
    other = await make_run(db, now=T0)
    await _enqueue(db, other, {"other": True})

    first = await _pick(db, T0)
    assert {r.run_id: r.payload for r in first} == {run.id: {"n": 1}, other.id: {"other": True}}
    [mine] = [r for r in first if r.run_id == run.id]
    [theirs] = [r for r in first if r.run_id == other.id]
    await outbox.mark_sent(db, theirs.id, now=T0)
    await outbox.retry_later(db, mine.id, at=T0 + timedelta(minutes=10), error="slack 503")

    # n=2 is due, but n=1 is still pending (in backoff): nothing of this run goes out.
    assert await _pick(db, T0 + timedelta(minutes=9)) == []

    again = await _pick(db, T0 + timedelta(minutes=10))
    assert [(r.id, r.payload, r.attempts) for r in again] == [(mine.id, {"n": 1}, 2)]
    await outbox.mark_sent(db, mine.id, now=T0 + timedelta(minutes=10))
    assert [r.payload for r in await _pick(db, T0 + timedelta(minutes=10))] == [{"n": 2}]


async def test_retry_later__row_is_due_again_only_at_that_time(db: Database) -> None:
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1})
    [row] = await _pick(db, T0)
    retry_at = T0 + timedelta(seconds=7)  # sooner than the lease: Retry-After is honoured

    await outbox.retry_later(db, row.id, at=retry_at, error="ratelimited, Retry-After: 7")

    assert await _pick(db, retry_at - timedelta(microseconds=1)) == []
    [again] = await _pick(db, retry_at)
    assert again.id == row.id and again.attempts == 2
    assert again.last_error == "ratelimited, Retry-After: 7"


async def test_mark_dead__after_n_attempts_the_row_is_given_up_and_unblocks_the_run(
    db: Database,
) -> None:
    max_attempts = 3
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1}, {"n": 2})
    now = T0
    for _ in range(max_attempts):  # the deliverer's policy: give up after N attempts
        [row] = await _pick(db, now)
        assert row.payload == {"n": 1}
        if row.attempts >= max_attempts:
            await outbox.mark_dead(db, row.id, error="channel_not_found")
            break
        now += timedelta(minutes=1)
        await outbox.retry_later(db, row.id, at=now, error="channel_not_found")

    dead, nxt = await outbox.for_run(db, run.id)
    assert dead.state is OutboxState.dead and dead.last_error == "channel_not_found"
    assert dead.attempts == max_attempts
    # Given up on, it neither goes out again nor holds back the run's later rows.
    assert [r.id for r in await _pick(db, now + timedelta(days=1))] == [nxt.id]
    await outbox.retry_later(db, dead.id, at=now, error="late retry")
    assert (await outbox.for_run(db, run.id))[0].state is OutboxState.dead


async def test_pick_due__row_of_a_dead_deliverer_is_due_again_after_the_lease(
    db: Database,
) -> None:
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1}, {"n": 2})
    [row] = await _pick(db, T0)  # the deliverer dies here: never marks it

    assert await _pick(db, T0 + LEASE - timedelta(microseconds=1)) == []
    [again] = await _pick(db, T0 + LEASE)
    assert again.id == row.id and again.payload == {"n": 1} and again.attempts == 2


async def test_counts__rows_per_state(db: Database) -> None:
    assert await outbox.counts(db) == {}
    run = await make_run(db, now=T0)
    await _enqueue(db, run, {"n": 1})
    other = await make_run(db, now=T0)
    await _enqueue(db, other, {"n": 1}, {"n": 2}, {"n": 3})
    third = await make_run(db, now=T0)
    await _enqueue(db, third, {"n": 1})

    picked = {r.run_id: r for r in await _pick(db, T0)}
    await outbox.mark_sent(db, picked[run.id].id, now=T0)
    await outbox.mark_dead(db, picked[third.id].id, error="invalid_blocks")
    await outbox.mark_sent(db, picked[other.id].id, now=T0)

    assert await outbox.counts(db) == {"sent": 2, "dead": 1, "pending": 2}


async def test_pick_due__limit_one_leases_exactly_one_row_of_many_due(db: Database) -> None:
    # Regression: on PostgreSQL ``id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`` was
    # re-run per outer row; rows the UPDATE had already leased were skipped by the lock,
    # so LIMIT moved on and one pick leased every due row, each then sat out its lease.
    for r in range(30):
        await _enqueue(db, await make_run(db, now=T0), {"run": r})

    picks = await _pick(db, T0, limit=1)

    assert len(picks) == 1, f"pick_due(limit=1) leased {len(picks)} rows"
    [picked] = picks

    rows = [row for r in await runs.list_runs(db, limit=100)
            for row in await outbox.for_run(db, r.id)]
    assert len(rows) == 30 and picked.id == min(row.id for row in rows)  # oldest first
    leased = [row for row in rows if row.attempts > 0]
    assert [(row.id, row.attempts, row.next_attempt_at) for row in leased] == [
        (picked.id, 1, T0 + LEASE)]
    assert all(row.attempts == 0 and row.next_attempt_at == T0
               for row in rows if row.id != picked.id)
    # The other 29 are still due, not sitting out a lease nobody will deliver on.
    assert len(await _pick(db, T0, limit=1)) == 1
    assert len(await _pick(db, T0, limit=50)) == 28
