"""Persistence: runs, their conversation, trace, ledger, approvals and outbox."""

from store.engine import Database, connect
from store.errors import (
    DatabaseUnavailable,
    LeaseLost,
    NotSerializable,
    PayloadTooLarge,
    RunNotFound,
    SchemaOutdated,
    StoreError,
)
from store.states import LedgerStatus, OutboxState, RunState

__all__ = [
    "Database",
    "DatabaseUnavailable",
    "LeaseLost",
    "LedgerStatus",
    "NotSerializable",
    "OutboxState",
    "PayloadTooLarge",
    "RunNotFound",
    "RunState",
    "SchemaOutdated",
    "StoreError",
    "connect",
]
