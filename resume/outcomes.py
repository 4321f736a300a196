"""Named, typed outcomes of the entry points, for the bot to render."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from resume.notices import FieldChange
from store.api_records import ApiCall
from store.records import Run


@dataclass(frozen=True)
class UnknownOrExpired:
    """The token names no open request: never issued, expired, or superseded."""

    reason: Literal["unknown", "expired", "superseded", "closed"]


@dataclass(frozen=True)
class NotAnApprover:
    actor: str
    requester: str
    approvers: list[str] | None  #: None: only the requester, or ``policy``
    policy: str | None = None  #: who may decide, in words (a predicate policy)


@dataclass(frozen=True)
class AlreadyResumed:
    decision: str
    by: str
    at: datetime


@dataclass(frozen=True)
class Claimed:
    """The click won; the run is running again under this process's lease."""

    run: Run
    call_id: str
    decision: Literal["approve", "decline"]


# What happened to the approved call once the run resumed.


@dataclass(frozen=True)
class Executed:
    run: Run
    result: object


@dataclass(frozen=True)
class Declined:
    run: Run
    reason: str | None


@dataclass(frozen=True)
class DetailsChanged:
    run: Run
    changes: list[FieldChange]


@dataclass(frozen=True)
class Blocked:
    run: Run
    code: str
    message: str


@dataclass(frozen=True)
class NoLongerPermitted:
    run: Run


@dataclass(frozen=True)
class Stopped:
    """The run ended or paused before the call was settled (failed, halted, lease lost)."""

    run: Run


CallOutcome = Executed | Declined | DetailsChanged | Blocked | NoLongerPermitted | Stopped
Refusal = UnknownOrExpired | NotAnApprover | AlreadyResumed


# The HTTP API's external runs and calls: what each entry hands back to the API door.


class ApiRefusal(StrEnum):
    """Why an API entry changed nothing; the door maps each to its HTTP status."""

    #: No such run or call for this key (another key's run looks missing too).
    not_found = "not_found"
    #: The key's tool globs do not cover the tool.
    tool_not_allowed = "tool_not_allowed"
    #: The idempotency key (or call id) was used before with another body.
    idempotency_conflict = "idempotency_conflict"
    #: The run is not in a state that allows this (waiting on a call, halted, ended).
    run_not_running = "run_not_running"
    #: The call is not approved: the message and ``details`` name its status.
    not_approved = "not_approved"
    #: Another caller holds the call's execution claim.
    already_executing = "already_executing"
    #: The call already ran (succeeded, failed, or unknown).
    already_executed = "already_executed"
    #: The preview changed since the approver saw it: a fresh decision is asked for.
    changed = "changed"
    #: The agent's re-run check refused the call.
    blocked = "blocked"
    #: The requester may no longer make the call: the run halted.
    no_longer_permitted = "no_longer_permitted"
    #: The call is not executing (or unknown), so there is nothing to report or extend.
    not_executing = "not_executing"
    #: A budget bound is reached: the run halted until its requester continues it.
    budget_exceeded = "budget_exceeded"
    #: Calls are still executing or unknown, so the run cannot finish yet.
    calls_in_flight = "calls_in_flight"
    #: The request is well-formed but cannot be stored (too large, not JSON).
    invalid = "invalid"


@dataclass(frozen=True)
class ApiRefused:
    code: ApiRefusal
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExternalRun:
    """An external run as created (``created``) or found again under its idempotency key."""

    run: Run
    created: bool


@dataclass(frozen=True)
class CallState:
    """An external call as it stands, with its run; ``created`` on its first request."""

    call: ApiCall
    run: Run
    created: bool = False


@dataclass(frozen=True)
class ExecutionClaimed:
    call: ApiCall
    idempotency_key: str
    lease_seconds: float
