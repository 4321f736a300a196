"""The outbox: every Slack post or update, delivered by a job with retries.

Rows are enqueued inside run transitions (``Effects.outbox``). Delivery picks
due rows with a lease (``next_attempt_at`` pushed forward in the same UPDATE),
so replicas never deliver the same row at once. A deliverer that names itself
(``owner_id``) holds its row by heartbeat, as a run's owner does: once the
heartbeat is older than ``stale_before`` the row is due again, however long
the lease, so a dead process strands nothing for long. Rows of one run go out
in order: a row waits while an earlier row of its run is still pending.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, insert, literal_column, or_, select, update
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import ColumnElement

from store import records, schema
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
    db: Database,
    *,
    now: datetime,
    limit: int = 20,
    lease: timedelta = timedelta(seconds=60),
    owner_id: str | None = None,
    stale_before: datetime | None = None,
    webhooks: bool = False,
) -> list[OutboxRow]:
    """Lease up to ``limit`` due rows, oldest first, at most one per run.

    ``owner_id`` takes the rows for that process, heartbeat now; with
    ``stale_before``, rows whose owner's heartbeat is older are taken over too.
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
        .where(_PENDING, _due(now, stale_before), _for_webhooks(OUTBOX, webhooks), ~blocked)
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
        .values(next_attempt_at=now + lease, attempts=OUTBOX.c.attempts + 1,
                owner_id=owner_id, heartbeat_at=now if owner_id is not None else None)
        .returning(*OUTBOX.c)
    )
    async with db.write() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return sorted((OutboxRow.from_row(r) for r in rows), key=lambda row: row.id)


def _due(now: datetime, stale_before: datetime | None) -> ColumnElement[bool]:
    if stale_before is None:
        return OUTBOX.c.next_attempt_at <= now
    # A row with an owner is held by its heartbeat alone: a slow live deliverer keeps
    # it past the lease, a dead one loses it well before.
    free = and_(OUTBOX.c.owner_id.is_(None), OUTBOX.c.next_attempt_at <= now)
    orphaned = and_(OUTBOX.c.owner_id.is_not(None), OUTBOX.c.heartbeat_at < stale_before)
    return or_(free, orphaned)


async def heartbeat(db: Database, row_id: int, *, owner_id: str, attempts: int,
                    now: datetime) -> bool:
    """Keep a taken row ours; False once it was settled or taken over."""
    where = [OUTBOX.c.id == row_id, _PENDING, OUTBOX.c.owner_id == owner_id,
             OUTBOX.c.attempts == attempts]
    async with db.write() as conn:
        result = await conn.execute(update(OUTBOX).where(*where).values(heartbeat_at=now))
    return result.rowcount == 1


# The marks below take the ``attempts`` value the pick returned: a deliverer
# slower than its lease must not settle a row another deliverer picked since.


async def mark_sent(
    db: Database, row_id: int, *, now: datetime, attempts: int | None = None
) -> bool:
    return await _set(db, row_id, attempts, state=OutboxState.sent.value, sent_at=now,
                      last_error=None, owner_id=None, heartbeat_at=None)


async def retry_later(
    db: Database, row_id: int, *, at: datetime, error: str, attempts: int | None = None
) -> bool:
    return await _set(db, row_id, attempts, next_attempt_at=at, last_error=error[:2000],
                      owner_id=None, heartbeat_at=None)


async def mark_dead(
    db: Database, row_id: int, *, error: str, attempts: int | None = None,
    follow_up: tuple[str, dict[str, Any]] | None = None, now: datetime | None = None,
) -> bool:
    """Give up on a row; ``follow_up`` (kind, payload) is enqueued with it, once, at ``now``."""
    settled = await _set(db, row_id, attempts, state=OutboxState.dead.value,
                         last_error=error[:2000], owner_id=None, heartbeat_at=None,
                         then=follow_up, now=now)
    return settled


async def _set(
    db: Database, row_id: int, attempts: int | None, *,
    then: tuple[str, dict[str, Any]] | None = None, now: datetime | None = None,
    **values: object,
) -> bool:
    """True when this caller still held the row and settled it (and enqueued ``then``)."""
    where = [OUTBOX.c.id == row_id, _PENDING]
    if attempts is not None:
        where.append(OUTBOX.c.attempts == attempts)
    async with db.write() as conn:
        stmt = update(OUTBOX).where(and_(*where)).values(**values).returning(OUTBOX.c.run_id)
        run_id = (await conn.execute(stmt)).scalar_one_or_none()
        if run_id is not None and then is not None:
            at = now or datetime.now(UTC)
            kind, payload = then
            await conn.execute(insert(OUTBOX).values(
                kind=kind, run_id=run_id, payload=records.dumps(payload, what=f"outbox {kind!r}"),
                state=OutboxState.pending.value, attempts=0, next_attempt_at=at, created_at=at))
    return run_id is not None


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


async def retry_dead(db: Database, row_id: int, *, now: datetime) -> OutboxRow | None:
    """Make a dead row due again now (an operator fixed the cause); None if it is not dead."""
    stmt = (
        update(OUTBOX)
        .where(OUTBOX.c.id == row_id, OUTBOX.c.state == OutboxState.dead.value)
        .values(state=OutboxState.pending.value, next_attempt_at=now, owner_id=None,
                heartbeat_at=None)
        .returning(*OUTBOX.c)
    )
    async with db.write() as conn:
        row = (await conn.execute(stmt)).mappings().first()
    return OutboxRow.from_row(row) if row is not None else None


async def get(db: Database, row_id: int) -> OutboxRow | None:
    async with db.read() as conn:
        row = (await conn.execute(select(OUTBOX).where(OUTBOX.c.id == row_id))).mappings().first()
    return OutboxRow.from_row(row) if row is not None else None


async def listing(db: Database, *, state: OutboxState | None = None,
                  limit: int = 100) -> list[OutboxRow]:
    """The newest rows (of one state, if given), newest first, for operators."""
    stmt = select(OUTBOX).order_by(OUTBOX.c.id.desc()).limit(limit)
    if state is not None:
        stmt = stmt.where(OUTBOX.c.state == state.value)
    async with db.read() as conn:
        rows = (await conn.execute(stmt)).mappings().all()
    return [OutboxRow.from_row(r) for r in rows]


async def refused_card(db: Database, run_id: str, token: str) -> OutboxRow | None:
    """The dead approval_card row for ``token``, if Slack refused that card for good."""
    for row in await for_run(db, run_id):
        if (row.kind == "approval_card" and row.state is OutboxState.dead
                and row.payload.get("token") == token):
            return row
    return None
