"""Run factories that chain: ``make_run`` -> ``make_suspended``."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from store import runs
from store.engine import Database
from store.records import Run
from store.transitions import Effects

LIMITS = {"max_steps": 10, "max_spend_usd": 1.0, "max_tool_calls": 10, "max_elapsed_ms": 600_000}


def utcnow() -> datetime:
    return datetime.now(UTC)


async def make_run(
    db: Database,
    *,
    user_id: str = "U1",
    owner_id: str = "owner-a",
    now: datetime | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> Run:
    new = runs.NewRun(
        id=f"run_{secrets.token_hex(8)}",
        user_id=user_id,
        question="draft a quote for Henderson, 200 of SKU-4411",
        limits=dict(LIMITS),
        owner_id=owner_id,
        snapshot_version=1,
        app_fingerprint="f" * 64,
    )
    fx = Effects(messages=messages or [{"role": "user", "content": new.question}],
                 events=[("start", {"user": user_id})])
    return await runs.create(db, new, now=now or utcnow(), fx=fx)


async def make_suspended(
    db: Database,
    *,
    user_id: str = "U1",
    now: datetime | None = None,
    ttl: timedelta = timedelta(minutes=30),
) -> tuple[Run, str]:
    now = now or utcnow()
    run = await make_run(db, user_id=user_id, now=now)
    token = secrets.token_urlsafe(24)
    suspension = runs.Suspension(
        call_id="call_1",
        tool="send_quote",
        pending={"call_id": "call_1", "tool": "send_quote", "args": {"quote_id": "Q-1"}},
        preview={"title": "Send quote", "fields": [["Total", "$100"]], "body": None},
        digest="d" * 64,
        token=token,
        expires_at=now + ttl,
        card={"token": token},
    )
    run = await runs.suspend(
        db, run.id, run.lease_epoch, suspension, now=now,
        fx=Effects(events=[("suspended", {"token": token})],
                   outbox=[("approval_card", {"token": token})]),
    )
    return run, token
