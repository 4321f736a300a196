"""Named, typed outcomes of the entry points, for the bot to render."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from resume.notices import FieldChange
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
