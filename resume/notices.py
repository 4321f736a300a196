"""What people must hear about a run, as data.

These are the payloads of outbox rows. ``resume`` decides *what* happened;
``bot`` decides how it looks in Slack. Nothing here knows about Slack.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class OutboxKind(StrEnum):
    #: Post a new approval card (a pending request with its preview and buttons).
    approval_card = "approval_card"
    #: Replace an existing approval card: buttons gone, a status line instead.
    card_update = "card_update"
    #: Post a message in the run's thread (or DM the requester) about its outcome.
    run_notice = "run_notice"
    #: POST a signed event to an API key's webhook URL (not Slack: its own sender).
    webhook = "webhook"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PreviewData(_Frozen):
    """A rendered preview: what the approver is shown and what the digest covers."""

    title: str
    fields: list[tuple[str, str]] = Field(default_factory=list)
    body: str | None = None


class BudgetData(_Frozen):
    steps: int
    spend_usd: float
    tool_calls: int
    elapsed_ms: int
    max_steps: int
    max_spend_usd: float
    max_tool_calls: int
    max_elapsed_ms: int


class FieldChange(_Frozen):
    """One line of a preview diff: ``field: old -> new`` (None = absent)."""

    field: str
    old: str | None
    new: str | None


class ApprovalCard(_Frozen):
    run_id: str
    token: str
    requester: str
    question: str
    tool: str
    dangerous: bool = False
    preview: PreviewData
    budget: BudgetData
    expires_at: float  #: epoch seconds
    approvers: list[str] | None = None  #: None: the requester approves, or ``approvers_policy``
    approvers_policy: str | None = None  #: who may approve, in words (a predicate policy)
    channel: str | None = None  #: None: DM the requester
    diff: list[FieldChange] | None = None  #: set when details changed while waiting
    replaces_token: str | None = None  #: the card this one supersedes (post in its thread)


CardStatus = Literal[
    "approved",
    "declined",
    "expired",
    "superseded",
    "cancelled",
    "guard_failed",
    "no_longer_permitted",
    "failed",
]


class CardUpdate(_Frozen):
    run_id: str
    token: str
    status: CardStatus
    actor: str | None = None
    at: float  #: epoch seconds
    reason: str | None = None


NoticeEvent = Literal[
    "answered", "failed", "halted", "expired", "continued", "cancelled", "call_ran",
    "call_unknown",
]


class EvidenceItem(_Frozen):
    """A tool that ran, in order, with the key fields of its result."""

    tool: str
    status: str
    fields: dict[str, Any] = Field(default_factory=dict)


class RunNotice(_Frozen):
    run_id: str
    requester: str
    event: NoticeEvent
    reason: str | None = None  #: e.g. "budget:steps", "incomplete", "outcome_unknown"
    answer: str | None = None
    detail: str | None = None  #: a human sentence: what happened and what to do
    evidence: list[EvidenceItem] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)  #: contract tools that never ran
    grant: dict[str, Any] | None = None
    channel: str | None = None  #: the approvals channel if the run has no thread yet


WebhookType = Literal["call.decided", "call.expired", "call.unknown", "run.finished"]


class WebhookEvent(_Frozen):
    """One event for the webhook of the key that created ``run_id``.

    ``id`` is the Standard Webhooks message id (the same on every retry).
    """

    id: str
    run_id: str
    type: WebhookType
    timestamp: float  #: epoch seconds, when it happened
    data: dict[str, Any]
