"""Budget: limits on steps, spend, tool calls and time; consumption survives every pause.

Consumed values live on the run row and only ever grow. A resume restores
them; nothing resets them. Only a person's continue raises the limits, and
that grant is recorded as an event.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from store.reasons import HaltReason
from store.records import Run


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_steps: int = Field(default=12, ge=1)
    max_spend_usd: float = Field(default=1.0, gt=0)
    max_tool_calls: int = Field(default=20, ge=1)
    max_elapsed_ms: int = Field(default=10 * 60 * 1000, ge=1)


class GrantPolicy(BaseModel):
    """What a person's continue adds: a deliberate, bounded extension."""

    model_config = ConfigDict(frozen=True)

    extra_steps: int = Field(default=4, ge=1)
    spend_factor: float = Field(default=1.5, gt=1)
    extra_tool_calls: int = Field(default=4, ge=1)
    elapsed_factor: float = Field(default=1.5, gt=1)


def limits_of(run: Run) -> Limits:
    return Limits.model_validate(run.limits)


def exceeded_before_step(run: Run) -> HaltReason | None:
    """The bound that forbids another model call, as ``budget:<bound>``, or None."""
    limits = limits_of(run)
    if run.step >= limits.max_steps:
        return HaltReason.budget_steps
    if run.spend_usd >= limits.max_spend_usd:
        return HaltReason.budget_spend
    if run.elapsed_ms >= limits.max_elapsed_ms:
        return HaltReason.budget_time
    return None


def exceeded_before_tool(run: Run) -> HaltReason | None:
    """The bound that forbids another tool call, or None."""
    if run.tool_calls >= limits_of(run).max_tool_calls:
        return HaltReason.budget_tool_calls
    if run.elapsed_ms >= limits_of(run).max_elapsed_ms:
        return HaltReason.budget_time
    return None


def grant(run: Run, policy: GrantPolicy) -> Limits:
    """New limits for a continued run: beyond what it has used, never reset.

    Each bound is raised from the larger of its old limit and what was
    consumed, so a continue always leaves room for at least a few steps.
    """
    old = limits_of(run)
    return Limits(
        max_steps=max(old.max_steps, run.step) + policy.extra_steps,
        max_spend_usd=round(max(old.max_spend_usd, run.spend_usd) * policy.spend_factor, 6),
        max_tool_calls=max(old.max_tool_calls, run.tool_calls) + policy.extra_tool_calls,
        max_elapsed_ms=int(max(old.max_elapsed_ms, run.elapsed_ms) * policy.elapsed_factor),
    )
