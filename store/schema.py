"""Tables, from one MetaData for SQLite and PostgreSQL.

Documents are text columns encoded by ``store.records.dumps`` (see there for why not
JSONB). Timestamps are timezone-aware UTC on both dialects (``records.UTCDateTime``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

# Re-exported: the migrations name the column type ``store.schema.UTCDateTime``.
from store.records import UTCDateTime as UTCDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


# SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (autoincrement).
_BigId = BigInteger().with_variant(Integer(), "sqlite")


def _state_literal(state: str) -> Any:
    # Partial-index predicates are literals: a generic plan cannot prove a
    # partial index from a bind parameter.
    return text(f"state = '{state}'")


runs = Table(
    "runs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("user_id", String(64), nullable=False),
    Column("question", Text, nullable=False),
    Column("route", String(100)),
    Column("state", String(16), nullable=False),
    Column("step", Integer, nullable=False, server_default="0"),
    Column("spend_usd", Float, nullable=False, server_default="0"),
    Column("tool_calls", Integer, nullable=False, server_default="0"),
    Column("elapsed_ms", BigInteger, nullable=False, server_default="0"),
    Column("limits", Text, nullable=False),
    Column("scope_snapshot", Text),
    Column("scope_resolved_at", UTCDateTime),
    Column("pending", Text),
    Column("pending_token", String(64), unique=True),
    Column("pending_preview", Text),
    Column("pending_preview_digest", String(64)),
    Column("expires_at", UTCDateTime),
    Column("halt_reason", String(100)),
    Column("answer", Text),
    Column("recovery_attempts", Integer, nullable=False, server_default="0"),
    Column("owner_id", String(64)),
    Column("lease_epoch", Integer, nullable=False, server_default="0"),
    Column("heartbeat_at", UTCDateTime),
    Column("snapshot_version", Integer, nullable=False),
    Column("app_fingerprint", String(64), nullable=False),
    Column("slack_channel", String(64)),
    Column("slack_ts", String(64)),
    # Next sequence numbers for run_messages / run_events, bumped by the same
    # guarded UPDATE that appends: no MAX() scan, no race between appenders.
    Column("message_seq", Integer, nullable=False, server_default="0"),
    Column("event_seq", Integer, nullable=False, server_default="0"),
    Column("started_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index(
        "ix_runs_running_heartbeat",
        "heartbeat_at",
        sqlite_where=_state_literal("running"),
        postgresql_where=_state_literal("running"),
    ),
    Index(
        "ix_runs_suspended_expires",
        "expires_at",
        sqlite_where=_state_literal("suspended"),
        postgresql_where=_state_literal("suspended"),
    ),
    Index("ix_runs_user_state", "user_id", "state"),
    # Retention reads finished runs by age; partial so it never competes with the sweeps.
    Index(
        "ix_runs_finished_updated",
        "updated_at",
        sqlite_where=text("state IN ('answered', 'halted', 'failed')"),
        postgresql_where=text("state IN ('answered', 'halted', 'failed')"),
    ),
)

run_messages = Table(
    "run_messages",
    metadata,
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("message", Text, nullable=False),
)

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("kind", String(40), nullable=False),
    Column("data", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("call_id", String(100), primary_key=True),
    Column("tool", String(100), nullable=False),
    Column("args", Text, nullable=False),
    Column("idempotency_key", String(200), nullable=False, unique=True),
    Column("status", String(16), nullable=False),
    Column("result", Text),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
)

approvals = Table(
    "approvals",
    metadata,
    # One row per approval card (pending token), kept after the decision so a
    # late or second click can be told who decided and when.
    Column("token", String(64), primary_key=True),
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("call_id", String(100), nullable=False),
    Column("tool", String(100), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("card", Text, nullable=False),
    Column("slack_channel", String(64)),
    Column("slack_ts", String(64)),
    Column("decision", String(16)),
    Column("decided_by", String(64)),
    Column("decided_at", UTCDateTime),
    Column("reason", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_approvals_run_id", "run_id"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", _BigId, primary_key=True, autoincrement=True),
    Column("kind", String(40), nullable=False),
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("payload", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    # The process delivering the row now, and its last sign of life (as for runs).
    Column("owner_id", String(64)),
    Column("heartbeat_at", UTCDateTime),
    Index(
        "ix_outbox_pending_due",
        "next_attempt_at",
        sqlite_where=_state_literal("pending"),
        postgresql_where=_state_literal("pending"),
    ),
    Index("ix_outbox_run_id", "run_id"),
)

seen_requests = Table(
    "seen_requests",
    metadata,
    # One row per signed request the door let through, kept for the signature window:
    # the same (timestamp, signature) again is a replay, whichever replica it reaches.
    Column("stamp", BigInteger, primary_key=True),
    Column("signature", String(80), primary_key=True),
)

# --- The HTTP API ------------------------------------------------------------------------

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    # SHA-256 of the key: the key itself is shown once, at creation, and never stored.
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("tools", Text, nullable=False),
    Column("webhook_url", Text),
    # A signing secret, so it is kept (a hash could not sign); shown once at creation.
    Column("webhook_secret", String(100)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
)

api_runs = Table(
    "api_runs",
    metadata,
    # Which key created a run through the API (another key gets 404), and the
    # idempotency key and body digest that make a repeated create return it.
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("key_id", String(40), ForeignKey("api_keys.id"), nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    Column("request_digest", String(64), nullable=False),
    #: True: the agent lives elsewhere and drives the run through the API.
    Column("external", Boolean, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("key_id", "idempotency_key", name="uq_api_runs_key_idempotency"),
)

api_calls = Table(
    "api_calls",
    metadata,
    # One external tool call. The approval card lives in ``approvals`` and the
    # execution in the ``tool_calls`` ledger, as for a hosted run; this row adds
    # what an agent elsewhere polls for: one status, and the execution lease.
    Column("run_id", String(40), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("call_id", String(100), primary_key=True),
    Column("tool", String(100), nullable=False),
    Column("args", Text, nullable=False),
    Column("request_digest", String(64), nullable=False),
    Column("spend_usd", Float, nullable=False, server_default="0"),
    Column("status", String(16), nullable=False),
    #: The token of the call's current approval card.
    Column("token", String(64)),
    Column("expires_at", UTCDateTime),
    Column("decided_by", String(64)),
    Column("decided_at", UTCDateTime),
    Column("reason", Text),
    Column("lease_until", UTCDateTime),
    Column("executed_at", UTCDateTime),
    Column("recovery_attempts", Integer, nullable=False, server_default="0"),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index(
        "ix_api_calls_executing_lease",
        "lease_until",
        sqlite_where=text("status = 'executing'"),
        postgresql_where=text("status = 'executing'"),
    ),
    Index("ix_api_calls_status", "status"),
)
