"""Builders for the outbox rows a transition writes (see resume.notices)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from resume import budget
from resume.notices import (
    BudgetData,
    CardStatus,
    CardUpdate,
    EvidenceItem,
    NoticeEvent,
    OutboxKind,
    RunNotice,
)
from store.records import Run

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
) -> Row:
    payload = RunNotice(
        run_id=run.id, requester=run.user_id, event=event, reason=reason, detail=detail,
        answer=answer, evidence=evidence or [], missing=missing or [], grant=grant,
        channel=channel,
    )
    return OutboxKind.run_notice.value, payload.model_dump(mode="json")
