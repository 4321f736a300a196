"""The outbox: every Slack post or update, delivered by a job with retries.

Rows are enqueued inside run transitions (``Effects.outbox``). Delivery picks
due rows with a short lease (``next_attempt_at`` pushed forward in the same
UPDATE), so replicas never deliver the same row at once and a deliverer that
dies leaves its rows due again after the lease. Rows of one run go out in
order: a row waits while an earlier row of its run is still pending.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, literal_column, select, update
from sqlalchemy.orm import aliased

from store import schema
from store.engine import Database
from store.records import OutboxRow
from store.states import OutboxState

OUTBOX = schema.outbox
# A literal, not a bind parameter, so the partial index on pending rows is provable.
_PENDING = OUTBOX.c.state == literal_column("'pending'")


#: The kind of the rows an API key's webhook receives; every other kind goes to Slack.
WEBHOOK = "webhook"


def _for_webhooks(table: Any, webhooks: bool) -> ColumnElement[bool]:
    is_webhook: ColumnElement[bool] = table.c.kind == literal_column(f"'{WEBHOOK}'")
    return is_webhook if webhooks else ~is_webhook


async def pick_due(
    db: Database, *, now: datetime, limit: int = 20, lease: timedelta = timedelta(seconds=60),
    webhooks: bool = False,
) -> list[OutboxRow]:
    """Lease up to ``limit`` due rows, oldest first, at most one per run.

    Slack rows and webhook rows (``webhooks=True``) are two queues with their own
    senders: a webhook receiver that is down never holds up a run's Slack messages.
    """
    earlier = aliased(OUTBOX)
    blocked = exists().where(
        earlier.c.run_id == OUTBOX.c.run_id,
        earlier.c.state == literal_column("'pending'"),
        earlier.c.id < OUTBOX.c.id,
        _for_webhooks(earlier, webhooks),
    )
    candidates = (
        select(OUTBOX.c.id)
        .where(_PENDING, OUTBOX.c.next_attempt_at <= now, _for_webhooks(OUTBOX, webhooks),
               ~blocked)
        .order_by(OUTBOX.c.id)
        .limit(limit)
    )
    if not db.is_sqlite:
        candidates = candidates.with_for_update(skip_locked=True)
    # A materialized CTE runs once. As an ``IN (subquery)`` PostgreSQL may re-run the
    # subquery per outer row; rows this UPDATE already changed are then skipped by the
    # lock and LIMIT moves on to the next, so every due row was leased, not ``limit``.
    due = candidates.cte("due").prefix_with("MATERIALIZED", dialect="postgresql")
    stmt = (
        update(OUTBOX)
        .where(OUTBOX.c.id.in_(select(due.c.id)), _PENDING)
        .values(next_attempt_at=now + lease, attempts=OUTBOX.c.attempts + 1)
        .returning(*OUTBOX.c)
    )
    async with db.write() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return sorted((OutboxRow.from_row(r) for r in rows), key=lambda row: row.id)


# The marks below take the ``attempts`` value the pick returned: a deliverer
# slower than its lease must not settle a row another deliverer picked since.


async def mark_sent(
    db: Database, row_id: int, *, now: datetime, attempts: int | None = None
) -> bool:
    return await _set(db, row_id, attempts,
                      state=OutboxState.sent.value, sent_at=now, last_error=None)


async def retry_later(
    db: Database, row_id: int, *, at: datetime, error: str, attempts: int | None = None
) -> bool:
    return await _set(db, row_id, attempts, next_attempt_at=at, last_error=error[:2000])


async def mark_dead(
    db: Database, row_id: int, *, error: str, attempts: int | None = None
) -> bool:
    return await _set(db, row_id, attempts, state=OutboxState.dead.value,
                      last_error=error[:2000])


async def _set(db: Database, row_id: int, attempts: int | None, **values: object) -> bool:
    """True when this caller still held the row and settled it."""
    where = [OUTBOX.c.id == row_id, _PENDING]
    if attempts is not None:
        where.append(OUTBOX.c.attempts == attempts)
    async with db.write() as conn:
        result = await conn.execute(update(OUTBOX).where(and_(*where)).values(**values))
    return result.rowcount == 1


async def for_run(db: Database, run_id: str) -> list[OutboxRow]:
    async with db.read() as conn:
        stmt = select(OUTBOX).where(OUTBOX.c.run_id == run_id).order_by(OUTBOX.c.id)
        rows = (await conn.execute(stmt)).mappings().all()
    return [OutboxRow.from_row(r) for r in rows]


async def counts(db: Database) -> dict[str, int]:
    """Rows per state, for health checks and the end-of-suite summary."""
    async with db.read() as conn:
        stmt = select(OUTBOX.c.state, func.count()).group_by(OUTBOX.c.state)
        rows = (await conn.execute(stmt)).all()
    return {state: int(n) for state, n in rows}
