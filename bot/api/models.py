"""The API's wire format: pydantic models for every request and response body.

These models are the contract: requests are validated by them (unknown
fields and wrong types are refused, nothing is coerced) and
``/api/v1/openapi.json`` is generated from them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_Id = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:@-]+$")]
_SlackUser = Annotated[str, Field(min_length=2, max_length=32, pattern=r"^[UW][A-Z0-9]+$")]
#: A Slack user id, or an email resolved with ``users.lookupByEmail``.
_Requester = Annotated[str, Field(min_length=2, max_length=254,
                                  pattern=r"^([UW][A-Z0-9]+|[^@\s]+@[^@\s]+\.[^@\s]+)$")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class LimitsIn(_In):
    max_tool_calls: int | None = Field(default=None, ge=1, le=10_000)
    max_spend_usd: float | None = Field(default=None, gt=0, le=1_000_000)


class CreateRun(_In):
    """An external run (``external: true``, with ``title``) or a hosted one (``question``)."""

    external: bool = False
    requester: _Requester
    title: str | None = Field(default=None, min_length=1, max_length=500)
    question: str | None = Field(default=None, min_length=1, max_length=4000)
    idempotency_key: str = Field(min_length=1, max_length=200)
    limits: LimitsIn | None = None

    @model_validator(mode="after")
    def _what_to_run(self) -> CreateRun:
        if self.external and not self.title:
            raise ValueError("an external run needs a title")
        if not self.external and not self.question:
            raise ValueError("a hosted run needs a question")
        return self


class PreviewIn(_In):
    """What the approver is shown; its digest is what the approval is bound to."""

    title: str = Field(min_length=1, max_length=500)
    fields: list[tuple[str, str]] = Field(default_factory=list, max_length=50)
    body: str | None = Field(default=None, max_length=3000)


class ApproversIn(_In):
    users: list[_SlackUser] = Field(min_length=1, max_length=20)


class RequestCall(_In):
    call_id: _Id
    tool: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
    args: dict[str, Any] = Field(default_factory=dict)
    preview: PreviewIn
    approvers: ApproversIn | None = None
    ttl_minutes: float | None = Field(default=None, gt=0, le=24 * 60)
    spend_usd: float = Field(default=0.0, ge=0, le=1_000_000)


class GuardIn(_In):
    ok: bool
    code: str | None = Field(default=None, max_length=100)
    message: str | None = Field(default=None, max_length=1000)


class ExecuteCall(_In):
    preview: PreviewIn
    guard: GuardIn = GuardIn(ok=True)
    permitted: bool = True


class ReportResult(_In):
    status: Literal["succeeded", "failed"]
    result: Any = None
    evidence: dict[str, Any] | None = None


class FinishRun(_In):
    answer: str = Field(max_length=20_000)
    requires: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=100)


CallStatusName = Literal["pending", "approved", "declined", "expired", "cancelled", "executing",
                         "succeeded", "failed", "unknown", "blocked"]


class Decision(_Out):
    by: str
    at: datetime
    reason: str | None = None


class Call(_Out):
    call_id: str
    run_id: str
    tool: str
    status: CallStatusName
    decision: Decision | None = None
    expires_at: datetime | None = None
    lease_until: datetime | None = None


class CallList(_Out):
    calls: list[Call]


class Budget(_Out):
    steps: int
    max_steps: int
    tool_calls: int
    max_tool_calls: int
    spend_usd: float
    max_spend_usd: float


class Evidence(_Out):
    """A call the ledger records as succeeded, with what it returned."""

    call_id: str
    tool: str
    result: Any = None


class Run(_Out):
    id: str
    external: bool
    state: Literal["running", "suspended", "halted", "answered", "failed"]
    reason: str | None = None
    requester: str
    title: str
    budget: Budget
    answer: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    started_at: datetime


class Execution(_Out):
    status: Literal["executing"] = "executing"
    idempotency_key: str
    lease_seconds: float
    call: Call


class Error(_Out):
    """Every 4xx body: a stable code and a sentence; some codes add fields (see the docs)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    error: str
    message: str
