"""What can go wrong in a round, as exceptions an agent can act on.

``Declined``, ``Expired`` and ``Blocked`` are the answers a person or a check gave: an
agent usually turns them into a tool result ("the refund was declined: over limit").
The rest say signoff could not finish the round; the message names the call and what
to do next.
"""

from __future__ import annotations

from typing import Any


class SignoffError(Exception):
    """Signoff could not complete the request."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ApiError(SignoffError):
    """The API refused the request."""

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.detail = message
        self.body = body


class Unavailable(SignoffError):
    """The API could not be reached; the call's state on the server is unchanged by this."""


class NotApproved(SignoffError):
    """The call was not approved; nothing ran."""

    def __init__(self, call_id: str, message: str) -> None:
        super().__init__(message)
        self.call_id = call_id


class Declined(NotApproved):
    """A person declined the call."""

    def __init__(self, call_id: str, reason: str | None, by: str | None = None,
                 changed: bool = False) -> None:
        said = f": {reason}" if reason else ""
        super().__init__(call_id, f"call {call_id} was declined{said}")
        self.reason = reason
        self.by = by
        #: True when the approver declined after being shown that the details changed.
        self.changed = changed


class Expired(NotApproved):
    """Nobody decided before the call expired."""

    def __init__(self, call_id: str) -> None:
        super().__init__(call_id, f"call {call_id} expired before anyone decided")


class Cancelled(NotApproved):
    """The run was cancelled while the call waited."""

    def __init__(self, call_id: str) -> None:
        super().__init__(call_id, f"call {call_id} was cancelled with its run")


class Blocked(NotApproved):
    """A guard refused the call at execution time."""

    def __init__(self, call_id: str, code: str, message: str) -> None:
        super().__init__(call_id, f"call {call_id} was blocked ({code}): {message}")
        self.code = code
        self.reason = message


class NoLongerPermitted(NotApproved):
    """The requester may no longer make this call; the run is halted."""

    def __init__(self, call_id: str) -> None:
        super().__init__(call_id, f"call {call_id}: the requester is no longer permitted; "
                                  "the run halted, ask again")


class AwaitingDecision(SignoffError):
    """The call waits for a person's decision (again, when the approved details changed)."""

    def __init__(self, call_id: str, changed: bool) -> None:
        super().__init__(f"call {call_id} waits for a {'fresh ' if changed else ''}decision")
        self.call_id = call_id
        self.changed = changed


class CallFailed(SignoffError):
    """The call ran and failed, or was settled as not done; the ledger says so."""

    def __init__(self, call_id: str, result: Any) -> None:
        super().__init__(f"call {call_id} failed: {result!r}")
        self.call_id = call_id
        self.result = result


class OutcomeUnknown(SignoffError):
    """Nobody knows whether the call ran. It is never retried by itself."""

    def __init__(self, call_id: str, idempotency_key: str | None) -> None:
        super().__init__(f"call {call_id} has an unknown outcome (idempotency key "
                         f"{idempotency_key}); give the tool a reconcile, or settle it "
                         "with so.reconcile()")
        self.call_id = call_id
        self.idempotency_key = idempotency_key


class ResultNotRecorded(SignoffError):
    """The tool ran but its result could not be reported; the call will turn unknown."""

    def __init__(self, call_id: str, result: Any) -> None:
        super().__init__(f"call {call_id} ran but its result was not recorded; "
                         "reconcile will settle it")
        self.call_id = call_id
        self.result = result


class NoRun(SignoffError):
    """A gated function was called outside ``async with so.run(...)``."""
