"""The outbox rows a transition writes: what people must hear about a run, as data.

``resume`` decides *what* happened; ``bot`` decides how it looks in Slack.
Nothing here knows about Slack. The builders at the end (``card_update``,
``notice``) make the ``(kind, payload)`` rows a transition's effects carry.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from resume import budget
from store.records import Run


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


NoticeEvent = Literal["answered", "failed", "halted", "expired", "continued", "cancelled",
                      "call_ran", "call_unknown"]


class EvidenceItem(_Frozen):
    """A tool that ran, in order, with the key fields of its result."""

    tool: str
    status: str
    fields: dict[str, Any] = Field(default_factory=dict)
    #: A tool a person had to approve (a write): once it succeeded, asking again repeats it.
    confirmed: bool = False


class DeclineData(_Frozen):
    """A person declined one of the run's requests: who, why, and which tool."""

    by: str
    reason: str | None = None
    tool: str | None = None


class RunNotice(_Frozen):
    run_id: str
    requester: str
    event: NoticeEvent
    reason: str | None = None  #: e.g. "budget:steps", "incomplete", "outcome_unknown"
    answer: str | None = None
    detail: str | None = None  #: a human sentence: what happened and what to do
    evidence: list[EvidenceItem] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)  #: required tools that did not succeed
    grant: dict[str, Any] | None = None
    channel: str | None = None  #: the approvals channel if the run has no thread yet
    declined: DeclineData | None = None  #: the run stopped because a person declined
    tool: str | None = None  #: the request an expiry or a decline was about
    external: bool = False  #: started through the API: its agent, not `/signoff ask`, retries


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


Row = tuple[str, dict[str, Any]]


def budget_data(run: Run) -> BudgetData:
    limits = budget.limits_of(run)
    return BudgetData(
        steps=run.step, spend_usd=round(run.spend_usd, 6), tool_calls=run.tool_calls,
        elapsed_ms=run.elapsed_ms, max_steps=limits.max_steps,
        max_spend_usd=limits.max_spend_usd, max_tool_calls=limits.max_tool_calls,
        max_elapsed_ms=limits.max_elapsed_ms,
    )


def card_update(
    run: Run, token: str, status: CardStatus, *, at: datetime, actor: str | None = None,
    reason: str | None = None,
) -> Row:
    update = CardUpdate(run_id=run.id, token=token, status=status, actor=actor,
                        at=at.timestamp(), reason=reason)
    return OutboxKind.card_update.value, update.model_dump(mode="json")


def notice(
    run: Run,
    event: NoticeEvent,
    *,
    channel: str | None,
    reason: str | None = None,
    detail: str | None = None,
    answer: str | None = None,
    evidence: list[EvidenceItem] | None = None,
    missing: list[str] | None = None,
    grant: dict[str, Any] | None = None,
    declined: DeclineData | None = None,
    tool: str | None = None,
) -> Row:
    payload = RunNotice(
        run_id=run.id, requester=run.user_id, event=event, reason=reason, detail=detail,
        answer=answer, evidence=evidence or [], missing=missing or [], grant=grant,
        channel=channel, declined=declined, tool=tool, external=run.external,
    )
    return OutboxKind.run_notice.value, payload.model_dump(mode="json")
