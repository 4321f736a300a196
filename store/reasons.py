"""Why a run stopped and why a request was refused: the words store writes and resume reads.

``halt_reason`` holds a HaltReason (a person can lift it: continue the run) or a
FailReason (terminal). A budget halt is ``budget:<bound>``.
"""

from __future__ import annotations

from enum import StrEnum


class HaltReason(StrEnum):
    #: The run used its model steps.
    budget_steps = "budget:steps"
    #: The run spent its money limit.
    budget_spend = "budget:spend"
    #: The run used its active time.
    budget_time = "budget:time"
    #: The run made its tool calls.
    budget_tool_calls = "budget:tool_calls"
    #: The model could not be reached or answered badly.
    model_error = "model_error"
    #: The requester's scope no longer permits an approved call.
    no_longer_permitted = "no_longer_permitted"
    #: Nobody approved or declined within the suspension window.
    suspension_expired = "suspension_expired"


class FailReason(StrEnum):
    #: The requester cancelled the run.
    cancelled = "cancelled"
    #: The final answer came without the route's contract tools having succeeded.
    incomplete = "incomplete"
    #: A tool cannot tell whether an earlier call took effect.
    outcome_unknown = "outcome_unknown"
    #: The run was recovered the maximum number of times already.
    recovery_exhausted = "recovery_exhausted"
    #: The stored snapshot cannot be resumed by this code.
    snapshot_incompatible = "snapshot_incompatible"
    #: A bug in a tool's preview or guard, or in the app.
    internal_error = "internal_error"
    #: The approval card could not be stored.
    preview_too_large = "preview_too_large"
    #: The router chose no route when the run started.
    no_route = "no_route"
    #: The run's recorded route cannot be found.
    route_lost = "route_lost"
    #: The route was recorded under a route table that has changed since.
    route_table_changed = "route_table_changed"


class RefusalReason(StrEnum):
    """Why a click, a continue or a cancel changed nothing."""

    #: The token names no approval request (never issued, or its run is gone).
    unknown = "unknown"
    #: Someone decided this request already.
    already_decided = "already_decided"
    #: The request's window passed (swept or not yet).
    expired = "expired"
    #: A newer request (details changed) replaced this one.
    superseded = "superseded"
    #: The request is no longer open: the run moved on (cancelled, failed...).
    closed = "closed"
    #: No run with this id belongs to the caller (someone else's answers the same).
    not_found = "not_found"
    #: The run is not halted, so there is nothing to continue.
    not_halted = "not_halted"
    #: The run is running, answered or failed: only suspended or halted runs cancel.
    not_cancellable = "not_cancellable"
