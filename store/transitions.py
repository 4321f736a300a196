"""The one shape of every run transition: a guarded UPDATE plus its effects.

``transition`` checks, inside its UPDATE, what its caller expects (state, lease
epoch, token); when another caller got there first it matches no row and
writes nothing, effects included.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, literal_column, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store import effects, schema
from store.effects import Effects
from store.records import Run
from store.states import RunState

log = logging.getLogger(__name__)
RUNS = schema.runs


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
    await effects.apply(
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
