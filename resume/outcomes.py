"""What each entry of ``resume`` returns: small, typed outcomes for a door to render.

A door (the Slack listeners, the CLI, the scheduler, the HTTP API) calls an
entry and translates its outcome to its own wire format. An outcome that
leaves the run running carries a ``drive`` (``resume.drive.Drive``): the door
awaits ``outcome.drive.go()``, or spawns it after answering, the same way for
every entry.

==========================  ==========================================================
entry                       outcome
==========================  ==========================================================
``ask.ask``                 ``Asked``
``decide.refusal``          ``Refusal | None`` (read-only: would a decision be taken?)
``decide.decide``           ``Claimed | Refusal``
``proceed.proceed``         ``CallOutcome``
``grant.grant_continue``    ``Continued | ContinueRefused``
``cancel.cancel``           ``Cancelled | CancelRefused``
``expire.expire_suspended`` ``list[Run]`` (the runs as halted)
``reap.recover_orphans``    ``RecoveryReport``
``purge.purge``             ``int`` (runs deleted)
==========================  ==========================================================

The HTTP API's runs and calls have their own entries, each returning its
outcome or an ``ApiRefused``: ``hosted_start.start_hosted`` (``HostedRun``,
through ``ask``), ``external_start.start_external`` (``ExternalRun``),
``call_request.request_call`` (``CallState``), ``call_execute.execute``
(``ExecutionClaimed``), ``call_report.report`` and ``heartbeat``
(``CallState``), ``external_end.finish`` and ``cancel`` (``ExternalRun``);
the reaper's ``call_reap.reap_calls`` (``CallsReaped``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from resume.outbox import FieldChange
from store.api_records import ApiCall
from store.reasons import RefusalReason
from store.records import Run

if TYPE_CHECKING:
    from resume.drive import Drive

#: What a person decided on a pending request.
Decision = Literal["approve", "decline"]


@dataclass(frozen=True)
class Asked:
    """The run was created, running and held by this process; ``drive`` carries it on."""

    run: Run
    drive: Drive


# A decision that changed nothing: why.


@dataclass(frozen=True)
class UnknownOrExpired:
    """The token names no open request: never issued, expired, superseded or closed."""

    reason: RefusalReason


@dataclass(frozen=True)
class NotAnApprover:
    """The approvers policy of the tool does not include ``actor``."""

    actor: str
    requester: str
    approvers: list[str] | None  #: None: only the requester, or ``policy``
    policy: str | None = None  #: who may decide, in words (a predicate policy)


@dataclass(frozen=True)
class AlreadyResumed:
    """Someone decided first: what, who and when."""

    decision: str
    by: str
    at: datetime


Refusal = UnknownOrExpired | NotAnApprover | AlreadyResumed


@dataclass(frozen=True)
class Claimed:
    """The decision won; the run is running again under this process's lease.

    ``drive`` carries it on (``proceed.proceed`` does, and says what became of ``call_id``).
    """

    run: Run
    call_id: str
    decision: Decision
    drive: Drive
    #: From the card's request (its suspension) to this decision.
    waited: timedelta


# What happened to the decided call once the run went on.


@dataclass(frozen=True)
class Executed:
    """The tool ran (or was found to have run) and succeeded."""

    run: Run
    result: object


@dataclass(frozen=True)
class Declined:
    """The decline (and its reason) went to the model as the call's result."""

    run: Run
    reason: str | None


@dataclass(frozen=True)
class DetailsChanged:
    """The preview changed since the card was shown: a new card asks again."""

    run: Run
    changes: list[FieldChange]


@dataclass(frozen=True)
class Blocked:
    """The tool's guard refused the call against the world as it is now."""

    run: Run
    code: str
    message: str


@dataclass(frozen=True)
class NoLongerPermitted:
    """The requester's scope no longer permits the tool: the run halted."""

    run: Run


@dataclass(frozen=True)
class Stopped:
    """The run ended or paused before the call was settled (failed, halted, lease lost)."""

    run: Run


CallOutcome = Executed | Declined | DetailsChanged | Blocked | NoLongerPermitted | Stopped


@dataclass(frozen=True)
class Continued:
    """The grant was made; ``drive`` carries the running run on."""

    run: Run
    previous_reason: str | None
    old_limits: dict[str, Any]
    new_limits: dict[str, Any]
    drive: Drive


@dataclass(frozen=True)
class ContinueRefused:
    """``not_found`` (missing, or someone else's) or ``not_halted``; nothing granted."""

    reason: RefusalReason


@dataclass(frozen=True)
class Cancelled:
    """The run failed ``cancelled``; an open card lost its buttons."""

    run: Run


@dataclass(frozen=True)
class CancelRefused:
    """``not_found`` or ``not_cancellable`` (running, answered or failed); nothing changed."""

    reason: RefusalReason


@dataclass(frozen=True)
class RecoveryReport:
    """One reaper pass."""

    #: Runs taken over and driven, as they stood when their drive stopped.
    recovered: list[Run] = field(default_factory=list)
    #: Runs that hit the recovery cap and were failed ``recovery_exhausted``.
    exhausted: list[Run] = field(default_factory=list)
    #: Ids of runs taken over whose drive stopped on an unreachable database;
    #: they stay ``running`` and the next pass takes them over again.
    interrupted: list[str] = field(default_factory=list)
    #: External calls whose lease ran out, and runs failed because one stayed unknown.
    calls: CallsReaped = field(default_factory=lambda: CallsReaped())

    @property
    def empty(self) -> bool:
        return not (self.recovered or self.exhausted or self.interrupted
                    or self.calls.unknown or self.calls.failed)


# The HTTP API's external runs and calls.


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
    #: The call is not approved: ``details`` names its status.
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
    #: The call is not executing (or unknown): nothing to report on or extend.
    not_executing = "not_executing"
    #: A budget bound is reached: the run halted until its requester continues it.
    budget_exceeded = "budget_exceeded"
    #: Calls are still executing or unknown, so the run cannot finish yet.
    calls_in_flight = "calls_in_flight"
    #: Well-formed, but cannot be stored (too large, not JSON).
    invalid = "invalid"


@dataclass(frozen=True)
class ApiRefused:
    code: ApiRefusal
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExternalRun:
    """An external run as created (``created``), found again, or ended."""

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


@dataclass(frozen=True)
class CallsReaped:
    #: Calls whose lease ran out on this pass.
    unknown: list[ApiCall] = field(default_factory=list)
    #: Runs failed ``outcome_unknown`` on this pass.
    failed: list[Run] = field(default_factory=list)
