"""The one shape of every run transition: a guarded UPDATE plus its effects, in one transaction.

``transition`` checks, inside its UPDATE, what its caller expects (state, lease
epoch, token); when another caller got there first it matches no row and
writes nothing, effects included.

Effects are what a transition writes besides the run row: it appends events
(the audit trail), may append conversation messages, may enqueue outbox rows
(what a person must hear) and may settle ledger rows. Bundling them with the
UPDATE is what makes "the state changed but nobody was told" impossible.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, literal_column, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store import call_watch, records, schema
from store.records import Run
from store.states import LedgerStatus, OutboxState, RunState

log = logging.getLogger(__name__)
RUNS = schema.runs


@dataclass(frozen=True)
class LedgerCompletion:
    call_id: str
    status: LedgerStatus
    result: Any


@dataclass(frozen=True)
class CallChange:
    """New values for an external call's row (``api_calls``), written with the transition."""

    call_id: str
    values: dict[str, Any]


@dataclass
class Effects:
    #: Conversation messages to append, in order.
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: (kind, data) events to append, in order.
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: (kind, payload) outbox rows to enqueue.
    outbox: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: Ledger rows to close.
    ledger: list[LedgerCompletion] = field(default_factory=list)
    #: External calls whose status moves with the run (their waiters are woken at commit).
    calls: list[CallChange] = field(default_factory=list)

    def encoded(self) -> EncodedEffects:
        """Encode every document up front, so a bad one fails before any write."""
        return EncodedEffects(
            messages=[
                records.dumps(m, what="message", limit=records.MAX_MESSAGE_BYTES)
                for m in self.messages
            ],
            events=[(k, records.dumps(d, what=f"event {k!r} data")) for k, d in self.events],
            outbox=[(k, records.dumps(p, what=f"outbox {k!r} payload")) for k, p in self.outbox],
            ledger=[
                (c.call_id, c.status, records.dumps(c.result, what=f"result of {c.call_id}"))
                for c in self.ledger
            ],
            calls=list(self.calls),
        )


@dataclass(frozen=True)
class EncodedEffects:
    messages: list[str]
    events: list[tuple[str, str]]
    outbox: list[tuple[str, str]]
    ledger: list[tuple[str, LedgerStatus, str]]
    calls: list[CallChange] = field(default_factory=list)


async def _apply(
    conn: AsyncConnection,
    run_id: str,
    effects: EncodedEffects,
    *,
    message_base: int,
    event_base: int,
    now: datetime,
) -> None:
    """Write the encoded effects; ``*_base`` are the sequence numbers before this write."""
    if effects.messages:
        await conn.execute(
            insert(schema.run_messages),
            [
                {"run_id": run_id, "seq": message_base + i + 1, "message": m}
                for i, m in enumerate(effects.messages)
            ],
        )
    if effects.events:
        await conn.execute(
            insert(schema.run_events),
            [
                {"run_id": run_id, "seq": event_base + i + 1, "kind": k, "data": d, "at": now}
                for i, (k, d) in enumerate(effects.events)
            ],
        )
    if effects.outbox:
        await conn.execute(
            insert(schema.outbox),
            [
                {
                    "kind": k,
                    "run_id": run_id,
                    "payload": p,
                    "state": OutboxState.pending.value,
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                }
                for k, p in effects.outbox
            ],
        )
    calls = schema.tool_calls
    for call_id, status, result in effects.ledger:
        await conn.execute(
            update(calls)
            .where(calls.c.run_id == run_id, calls.c.call_id == call_id)
            .values(status=status.value, result=result, finished_at=now)
        )
    external = schema.api_calls
    for change in effects.calls:
        await conn.execute(
            update(external)
            .where(external.c.run_id == run_id, external.c.call_id == change.call_id)
            .values(**change.values, updated_at=now)
        )
        await call_watch.notify(conn, run_id, change.call_id)


def state_is(*states: RunState) -> ColumnElement[bool]:
    """A state predicate rendered as SQL literals, so partial indexes are provable."""
    if len(states) == 1:
        return RUNS.c.state == literal_column(f"'{states[0].value}'")
    return RUNS.c.state.in_([literal_column(f"'{s.value}'") for s in states])


async def transition(
    conn: AsyncConnection,
    *,
    run_id: str | None,
    where: Sequence[ColumnElement[bool]],
    values: dict[str, Any],
    fx: Effects,
    now: datetime,
    action: str,
) -> Run | None:
    """Apply one guarded UPDATE plus its effects; None when the guard did not match.

    ``run_id`` None: ``where`` alone must single out at most one run (a claim
    finds its run by the unique pending token).
    """
    enc = fx.encoded()
    target = [RUNS.c.id == run_id] if run_id is not None else []
    stmt = (
        update(RUNS)
        .where(*target, *where)
        .values(
            **values,
            updated_at=now,
            message_seq=RUNS.c.message_seq + len(enc.messages),
            event_seq=RUNS.c.event_seq + len(enc.events),
        )
        .returning(*RUNS.c)
    )
    row = (await conn.execute(stmt)).mappings().first()
    if row is None:
        return None
    run = Run.from_row(row)
    await _apply(
        conn,
        run.id,
        enc,
        message_base=run.message_seq - len(enc.messages),
        event_base=run.event_seq - len(enc.events),
        now=now,
    )
    log.info("%s run %s -> %s", action, run.id, run.state.value,
             extra={"action": action, "run_id": run.id, "state": run.state.value})
    return run
