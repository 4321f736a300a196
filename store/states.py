"""Run states, stored as text."""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    #: An agent step is being worked on by the process holding the lease.
    running = "running"
    #: Waiting for a person to approve or decline a pending request.
    suspended = "suspended"
    #: Stopped for a reason a person can lift (budget, expiry, permissions): continue it.
    halted = "halted"
    #: Finished with its route's contract met. Terminal.
    answered = "answered"
    #: Stopped for good, loudly, with a reason. Terminal.
    failed = "failed"


#: States a run never leaves.
TERMINAL = frozenset({RunState.answered, RunState.failed})
#: States the retention purge may delete (after the retention window).
PURGEABLE = frozenset({RunState.answered, RunState.halted, RunState.failed})


class LedgerStatus(StrEnum):
    #: Committed before the tool is called: its outcome is unknown until completed.
    started = "started"
    succeeded = "succeeded"
    failed = "failed"
    #: Recovery could not tell whether the write happened.
    unknown = "unknown"


class OutboxState(StrEnum):
    pending = "pending"
    sent = "sent"
    #: Gave up after the maximum attempts; logged loudly.
    dead = "dead"


class CallStatus(StrEnum):
    """An external tool call's status, as its agent reads it through the API."""

    #: Its approval card is waiting for a person.
    pending = "pending"
    #: A person approved it; the agent may claim its execution.
    approved = "approved"
    #: A person declined it. Terminal.
    declined = "declined"
    #: Nobody decided before its card expired. Terminal.
    expired = "expired"
    #: Its run was cancelled or ended before it ran. Terminal.
    cancelled = "cancelled"
    #: One agent holds the execution claim, under a lease.
    executing = "executing"
    #: The agent reported success. Terminal.
    succeeded = "succeeded"
    #: The agent reported failure. Terminal.
    failed = "failed"
    #: The lease ran out with no result: it may or may not have run; reconcile it.
    unknown = "unknown"
    #: A check the agent ran again at execution refused it. Terminal.
    blocked = "blocked"


#: Statuses a call never leaves.
CALL_TERMINAL = frozenset({
    CallStatus.declined, CallStatus.expired, CallStatus.cancelled, CallStatus.succeeded,
    CallStatus.failed, CallStatus.blocked,
})
