"""signoff-client: ask signoff for approval from an agent that lives anywhere."""

from signoff_client.client import Signoff
from signoff_client.context import CallContext, current_call
from signoff_client.errors import (
    ApiError,
    AwaitingDecision,
    Blocked,
    CallFailed,
    Cancelled,
    Declined,
    Expired,
    NoLongerPermitted,
    NoRun,
    NotApproved,
    OutcomeUnknown,
    ResultNotRecorded,
    SignoffError,
    Unavailable,
)
from signoff_client.models import Call, CallStatus, Limits, Preview, RunInfo
from signoff_client.runs import Run
from signoff_client.sync import SyncRun, SyncSignoff
from signoff_client.tools import Guard, Reconciliation, Tool

__all__ = [
    "ApiError",
    "AwaitingDecision",
    "Blocked",
    "Call",
    "CallContext",
    "CallFailed",
    "CallStatus",
    "Cancelled",
    "Declined",
    "Expired",
    "Guard",
    "Limits",
    "NoLongerPermitted",
    "NoRun",
    "NotApproved",
    "OutcomeUnknown",
    "Preview",
    "Reconciliation",
    "ResultNotRecorded",
    "Run",
    "RunInfo",
    "Signoff",
    "SignoffError",
    "SyncRun",
    "SyncSignoff",
    "Tool",
    "Unavailable",
    "current_call",
]
