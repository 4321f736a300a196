"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 07:35:44.314447
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import store.schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("route", sa.String(length=100), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("step", sa.Integer(), server_default="0", nullable=False),
        sa.Column("spend_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("tool_calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("elapsed_ms", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("limits", sa.Text(), nullable=False),
        sa.Column("scope_snapshot", sa.Text(), nullable=True),
        sa.Column("scope_resolved_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("pending", sa.Text(), nullable=True),
        sa.Column("pending_token", sa.String(length=64), nullable=True),
        sa.Column("pending_preview", sa.Text(), nullable=True),
        sa.Column("pending_preview_digest", sa.String(length=64), nullable=True),
        sa.Column("expires_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("halt_reason", sa.String(length=100), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("recovery_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("owner_id", sa.String(length=64), nullable=True),
        sa.Column("lease_epoch", sa.Integer(), server_default="0", nullable=False),
        sa.Column("heartbeat_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("snapshot_version", sa.Integer(), nullable=False),
        sa.Column("app_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("slack_channel", sa.String(length=64), nullable=True),
        sa.Column("slack_ts", sa.String(length=64), nullable=True),
        sa.Column("message_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("event_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("started_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("pending_token", name=op.f("uq_runs_pending_token")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_finished_updated",
            ["updated_at"],
            unique=False,
            sqlite_where=sa.text("state IN ('answered', 'halted', 'failed')"),
            postgresql_where=sa.text("state IN ('answered', 'halted', 'failed')"),
        )
        batch_op.create_index(
            "ix_runs_running_heartbeat",
            ["heartbeat_at"],
            unique=False,
            sqlite_where=sa.text("state = 'running'"),
            postgresql_where=sa.text("state = 'running'"),
        )
        batch_op.create_index(
            "ix_runs_suspended_expires",
            ["expires_at"],
            unique=False,
            sqlite_where=sa.text("state = 'suspended'"),
            postgresql_where=sa.text("state = 'suspended'"),
        )
        batch_op.create_index("ix_runs_user_state", ["user_id", "state"], unique=False)

    op.create_table(
        "approvals",
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("call_id", sa.String(length=100), nullable=False),
        sa.Column("tool", sa.String(length=100), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("card", sa.Text(), nullable=False),
        sa.Column("slack_channel", sa.String(length=64), nullable=True),
        sa.Column("slack_ts", sa.String(length=64), nullable=True),
        sa.Column("decision", sa.String(length=16), nullable=True),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("decided_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_approvals_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_approvals")),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_run_id", ["run_id"], unique=False)

    op.create_table(
        "outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("sent_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_outbox_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index(
            "ix_outbox_pending_due",
            ["next_attempt_at"],
            unique=False,
            sqlite_where=sa.text("state = 'pending'"),
            postgresql_where=sa.text("state = 'pending'"),
        )
        batch_op.create_index("ix_outbox_run_id", ["run_id"], unique=False)

    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_events")),
    )
    op.create_table(
        "run_messages",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_messages_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_messages")),
    )
    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("call_id", sa.String(length=100), nullable=False),
        sa.Column("tool", sa.String(length=100), nullable=False),
        sa.Column("args", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("started_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_tool_calls_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "call_id", name=op.f("pk_tool_calls")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_tool_calls_idempotency_key")),
    )


def downgrade() -> None:
    op.drop_table("tool_calls")
    op.drop_table("run_messages")
    op.drop_table("run_events")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_run_id")
        batch_op.drop_index(
            "ix_outbox_pending_due",
            sqlite_where=sa.text("state = 'pending'"),
            postgresql_where=sa.text("state = 'pending'"),
        )

    op.drop_table("outbox")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index("ix_approvals_run_id")

    op.drop_table("approvals")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_user_state")
        batch_op.drop_index(
            "ix_runs_suspended_expires",
            sqlite_where=sa.text("state = 'suspended'"),
            postgresql_where=sa.text("state = 'suspended'"),
        )
        batch_op.drop_index(
            "ix_runs_running_heartbeat",
            sqlite_where=sa.text("state = 'running'"),
            postgresql_where=sa.text("state = 'running'"),
        )
        batch_op.drop_index(
            "ix_runs_finished_updated",
            sqlite_where=sa.text("state IN ('answered', 'halted', 'failed')"),
            postgresql_where=sa.text("state IN ('answered', 'halted', 'failed')"),
        )

    op.drop_table("runs")
