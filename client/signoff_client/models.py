"""The API's wire shapes, as the client reads and writes them.

Responses are read leniently (unknown fields are kept, not refused) so a newer server
does not break an older client; requests are built from these models so they match the
server's contract.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

JsonObject = dict[str, Any]


class Preview(BaseModel):
    """What an approver is shown. The approval is bound to its digest."""

    model_config = ConfigDict(frozen=True)

    title: str
    fields: list[tuple[str, str]] = []
    body: str | None = None

    def digest(self) -> str:
        """sha256 of the canonical JSON, computed as the server computes it."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def default_preview(tool: str, args: JsonObject) -> Preview:
    """The tool's name and its arguments, one field each: what a card shows with no renderer."""
    fields = [(k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
              for k, v in args.items()]
    return Preview(title=f"Run {tool}", fields=fields)


class CallStatus(StrEnum):
    pending = "pending"  #: waiting for a person
    approved = "approved"  #: a person approved; nobody has claimed the execution yet
    declined = "declined"  #: a person declined (decision.reason says why, if they did)
    expired = "expired"  #: nobody decided in time
    cancelled = "cancelled"  #: the run was cancelled while the call waited
    executing = "executing"  #: claimed: one caller holds the lease and is running it
    succeeded = "succeeded"  #: ran; the ledger has the result
    failed = "failed"  #: ran and failed, or was settled as not done
    unknown = "unknown"  #: the lease ran out with no result: reconcile it
    blocked = "blocked"  #: a guard refused it at execution time


#: Statuses after which nothing more happens to a call.
SETTLED = frozenset({CallStatus.declined, CallStatus.expired, CallStatus.cancelled,
                     CallStatus.succeeded, CallStatus.failed, CallStatus.blocked})


class Decision(BaseModel):
    model_config = ConfigDict(extra="allow")

    by: str | None = None
    at: datetime | None = None
    reason: str | None = None


class Call(BaseModel):
    """A call as the server reports it."""

    model_config = ConfigDict(extra="allow")

    call_id: str
    status: CallStatus
    run_id: str | None = None
    tool: str | None = None
    args: JsonObject | None = None
    expires_at: datetime | None = None
    decision: Decision | None = None
    idempotency_key: str | None = None
    result: Any = None
    code: str | None = None
    message: str | None = None


class RunInfo(BaseModel):
    """A run as the server reports it."""

    model_config = ConfigDict(extra="allow")

    id: str
    state: str
    reason: str | None = None  #: why it halted or failed
    answer: str | None = None


class Grant(BaseModel):
    """The execution claim won: run the tool now, under the lease."""

    model_config = ConfigDict(extra="allow")

    status: str
    idempotency_key: str
    lease_seconds: float


class Limits(BaseModel):
    max_tool_calls: int | None = None
    max_spend_usd: float | None = None


def guard_body(ok: bool, code: str | None, message: str | None) -> JsonObject:
    return {"ok": True} if ok else {"ok": False, "code": code, "message": message}
