"""Typed, immutable views of stored rows, and how their values are stored.

Timestamps are aware UTC datetimes in and out, on both dialects (``UTCDateTime``).
Documents are stored as text, not JSONB: PostgreSQL's JSONB refuses ``\\u0000``,
which model output can contain. ``json.dumps`` escapes control characters, so
the text never holds a NUL byte and round-trips byte-for-byte. Sizes are
checked (``dumps``) before any write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect, RowMapping
from sqlalchemy.types import TypeDecorator

from store import errors
from store.states import LedgerStatus, OutboxState, RunState

#: ``runs.app_fingerprint`` of an external run: no app of ours defines its tools, and
#: nobody here drives it (the reaper leaves it alone; see ``store.sweeps``).
EXTERNAL_FINGERPRINT = "external"
#: One conversation message (a model reply or a tool result). Larger results
#: should be summarised by the tool; 256 KiB is far above any model's useful input.
MAX_MESSAGE_BYTES = 256 * 1024
#: Any other document: event data, tool arguments and results, previews, outbox payloads.
MAX_DOCUMENT_BYTES = 128 * 1024


def dumps(value: Any, *, what: str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """Encode ``value``; raise NotSerializable or PayloadTooLarge, naming ``what``."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise errors.NotSerializable(what, str(exc)) from exc
    size = len(text.encode("utf-8"))
    if size > limit:
        raise errors.PayloadTooLarge(what, size, limit)
    return text


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on both dialects.

    SQLite stores naive ISO text, which sorts correctly only if every value is
    UTC: so values are normalised to UTC before they are written.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class Run:
    id: str
    user_id: str
    question: str
    route: str | None
    state: RunState
    step: int
    spend_usd: float
    tool_calls: int
    elapsed_ms: int
    limits: dict[str, Any]
    scope_snapshot: Any
    scope_resolved_at: datetime | None
    pending: dict[str, Any] | None
    pending_token: str | None
    pending_preview: dict[str, Any] | None
    pending_preview_digest: str | None
    expires_at: datetime | None
    halt_reason: str | None
    answer: str | None
    recovery_attempts: int
    owner_id: str | None
    lease_epoch: int
    heartbeat_at: datetime | None
    snapshot_version: int
    app_fingerprint: str
    slack_channel: str | None
    slack_ts: str | None
    message_seq: int
    event_seq: int
    started_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> Run:
        data = dict(row)
        for key in ("limits", "scope_snapshot", "pending", "pending_preview"):
            data[key] = loads(data[key])
        data["state"] = RunState(data["state"])
        return cls(**data)

    @property
    def external(self) -> bool:
        """Its agent lives elsewhere and moves it through the API; nobody here drives it."""
        return self.app_fingerprint == EXTERNAL_FINGERPRINT


@dataclass(frozen=True)
class Event:
    run_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> Event:
        return cls(row["run_id"], row["seq"], row["kind"], loads(row["data"]), row["at"])


@dataclass(frozen=True)
class LedgerEntry:
    run_id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    idempotency_key: str
    status: LedgerStatus
    result: Any
    started_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: RowMapping) -> LedgerEntry:
        data = dict(row)
        data["args"] = loads(data["args"])
        data["result"] = loads(data["result"])
        data["status"] = LedgerStatus(data["status"])
        return cls(**data)


@dataclass(frozen=True)
class Approval:
    token: str
    run_id: str
    call_id: str
    tool: str
    digest: str
    card: dict[str, Any]
    slack_channel: str | None
    slack_ts: str | None
    decision: str | None
    decided_by: str | None
    decided_at: datetime | None
    reason: str | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> Approval:
        data = dict(row)
        data["card"] = loads(data["card"])
        return cls(**data)


@dataclass(frozen=True)
class OutboxRow:
    id: int
    kind: str
    run_id: str
    payload: dict[str, Any]
    state: OutboxState
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    owner_id: str | None = None
    heartbeat_at: datetime | None = None

    @classmethod
    def from_row(cls, row: RowMapping) -> OutboxRow:
        data = dict(row)
        data["payload"] = loads(data["payload"])
        data["state"] = OutboxState(data["state"])
        return cls(**data)
