"""Approvals and taking a run back into ``running``: a click's claim, a continue, a cancel.

An approval record is kept per approval card (its token, the digest the
approver saw, where the card was posted) and records the decision. A claim is
one guarded UPDATE: of any number of concurrent callers with the same token,
exactly one gets the run back; the others change nothing and learn who
decided and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store import records, schema
from store.engine import Database
from store.reasons import FailReason, HaltReason, RefusalReason
from store.records import Approval, Run
from store.states import RunState
from store.transitions import Effects, state_is, transition

RUNS = schema.runs
APPROVALS = schema.approvals


async def _approval_in(conn: AsyncConnection, token: str) -> Approval | None:
    stmt = select(APPROVALS).where(APPROVALS.c.token == token)
    row = (await conn.execute(stmt)).mappings().first()
    return Approval.from_row(row) if row is not None else None


async def approval(db: Database, token: str) -> Approval | None:
    """The approval record of ``token``: decided or not, None for a token never issued."""
    async with db.read() as conn:
        return await _approval_in(conn, token)


async def approvals_of(db: Database, run_id: str) -> list[Approval]:
    """Every approval record of the run, oldest first."""
    async with db.read() as conn:
        stmt = (select(APPROVALS).where(APPROVALS.c.run_id == run_id)
                .order_by(APPROVALS.c.created_at))
        rows = (await conn.execute(stmt)).mappings().all()
    return [Approval.from_row(r) for r in rows]


async def set_card_ref(db: Database, token: str, channel: str, ts: str) -> None:
    """Remember where the card for ``token`` was posted, so it can be updated later."""
    async with db.write() as conn:
        await conn.execute(
            update(APPROVALS)
            .where(APPROVALS.c.token == token)
            .values(slack_channel=channel, slack_ts=ts)
        )


@dataclass(frozen=True)
class ClaimWon:
    run: Run
    approval: Approval


@dataclass(frozen=True)
class ClaimRefused:
    reason: RefusalReason
    approval: Approval | None
    run: Run | None


async def claim(
    db: Database,
    token: str,
    *,
    decision: str,
    actor: str,
    reason: str | None,
    owner_id: str,
    now: datetime,
    fx: Effects,
) -> ClaimWon | ClaimRefused:
    """suspended -> running for the holder of ``token``; records the decision.

    The winner gets the run with a new lease (epoch + 1) owned by ``owner_id``,
    and the approval row records who decided what, in the same transaction. A
    suspension at or past ``expires_at`` cannot be claimed: the expiry sweep
    and a click at the boundary never both win. Concurrent callers: one wins;
    every other one changes nothing and is told why (``already_decided`` with
    the winner's approval row, once the winner has committed).

    The winner's path is four statements: the guarded UPDATE finds the run by
    its unique pending token (no lookup first), the effects' inserts, and
    ``UPDATE approvals ... RETURNING`` (no re-read).
    """
    async with db.write() as conn:
        run = await transition(
            conn,
            run_id=None,  # pending_token is unique: it names the run
            where=[RUNS.c.pending_token == token, state_is(RunState.suspended),
                   RUNS.c.expires_at > now],
            values={"state": RunState.running.value, "owner_id": owner_id,
                    "lease_epoch": RUNS.c.lease_epoch + 1, "heartbeat_at": now},
            fx=fx, now=now, action="claim",
        )
        if run is not None:
            decided = (await conn.execute(
                update(APPROVALS)
                .where(APPROVALS.c.token == token)
                .values(decision=decision, decided_by=actor, decided_at=now, reason=reason)
                .returning(*APPROVALS.c)
            )).mappings().one()
            return ClaimWon(run, Approval.from_row(decided))
        # Refused. Read after the UPDATE: on PostgreSQL the winner may have committed
        # while we waited on its row lock, and this is what it left.
        approval = await _approval_in(conn, token)
        if approval is None:
            return ClaimRefused(RefusalReason.unknown, None, None)
        current_stmt = select(RUNS).where(RUNS.c.id == approval.run_id)
        current = (await conn.execute(current_stmt)).mappings().first()
    current_run = Run.from_row(current) if current is not None else None
    return ClaimRefused(_why_refused(approval, current_run, token, now), approval, current_run)


def _why_refused(
    approval: Approval, run: Run | None, token: str, now: datetime
) -> RefusalReason:
    if approval.decided_by is not None:
        return RefusalReason.already_decided
    if run is None:
        return RefusalReason.unknown
    if run.state is RunState.suspended and run.pending_token == token:
        # Still suspended with this token: only the expiry guard refused.
        return RefusalReason.expired
    if run.pending_token != token and run.state in (RunState.suspended, RunState.running):
        return RefusalReason.superseded
    if run.halt_reason == HaltReason.suspension_expired:
        return RefusalReason.expired
    return RefusalReason.closed


def _at_epoch(epoch: int | None) -> list[ColumnElement[bool]]:
    return [] if epoch is None else [RUNS.c.lease_epoch == epoch]


async def continue_halted(
    db: Database,
    run_id: str,
    *,
    user_id: str,
    owner_id: str,
    limits: dict[str, Any],
    now: datetime,
    fx: Effects,
    epoch: int | None = None,
) -> Run | RefusalReason:
    """halted -> running with new limits, for the run's own requester only.

    Someone else's run answers ``not_found``, exactly like a missing one, so run
    ids leak nothing. With ``epoch`` the UPDATE also requires the lease epoch
    the caller computed ``limits`` from: a continue computed from a stale reading
    grants nothing and answers ``not_halted`` (re-read the run before retrying).
    """
    async with db.write() as conn:
        run = await transition(
            conn,
            run_id=run_id,
            where=[state_is(RunState.halted), RUNS.c.user_id == user_id, *_at_epoch(epoch)],
            values={
                "state": RunState.running.value,
                "limits": records.dumps(limits, what="limits"),
                "halt_reason": None,
                "pending_token": None,
                "owner_id": owner_id,
                "lease_epoch": RUNS.c.lease_epoch + 1,
                "heartbeat_at": now,
            },
            fx=fx,
            now=now,
            action="continue",
        )
        return run if run is not None else await _refused(conn, run_id, user_id,
                                                          RefusalReason.not_halted)


async def cancel(
    db: Database, run_id: str, *, user_id: str, now: datetime, fx: Effects,
    epoch: int | None = None,
) -> Run | RefusalReason:
    """suspended|halted -> failed(cancelled), for the run's own requester only.

    With ``epoch``, only if the run is still at the lease epoch the caller read
    (its effects, e.g. which card to strip, were computed from that reading).
    """
    async with db.write() as conn:
        run = await transition(
            conn,
            run_id=run_id,
            where=[state_is(RunState.suspended, RunState.halted), RUNS.c.user_id == user_id,
                   *_at_epoch(epoch)],
            values={
                "state": RunState.failed.value,
                "halt_reason": FailReason.cancelled.value,
                "pending_token": None,
                "heartbeat_at": None,
            },
            fx=fx,
            now=now,
            action="cancel",
        )
        return run if run is not None else await _refused(conn, run_id, user_id,
                                                          RefusalReason.not_cancellable)


async def _refused(
    conn: AsyncConnection, run_id: str, user_id: str, otherwise: RefusalReason
) -> RefusalReason:
    """Someone else's run answers ``not_found`` exactly like a missing one; the requester's
    own, ``otherwise``."""
    row = (await conn.execute(select(RUNS.c.user_id).where(RUNS.c.id == run_id))).first()
    return RefusalReason.not_found if row is None or row.user_id != user_id else otherwise
