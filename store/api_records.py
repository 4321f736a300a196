"""Typed views of the API's rows: keys, the runs they created, external calls."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import RowMapping

from store import records
from store.states import CallStatus


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    key_hash: str
    tools: list[str]
    webhook_url: str | None
    webhook_secret: str | None
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: RowMapping) -> ApiKey:
        data = dict(row)
        data["tools"] = records.loads(data["tools"])
        return cls(**data)


@dataclass(frozen=True)
class ApiRun:
    run_id: str
    key_id: str
    idempotency_key: str
    request_digest: str
    external: bool
    created_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> ApiRun:
        return cls(**dict(row))


@dataclass(frozen=True)
class ApiCall:
    run_id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    request_digest: str
    spend_usd: float
    status: CallStatus
    token: str | None
    expires_at: datetime | None
    decided_by: str | None
    decided_at: datetime | None
    reason: str | None
    lease_until: datetime | None
    executed_at: datetime | None
    recovery_attempts: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> ApiCall:
        data = dict(row)
        data["args"] = records.loads(data["args"])
        data["status"] = CallStatus(data["status"])
        return cls(**data)
