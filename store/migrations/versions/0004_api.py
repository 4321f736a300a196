"""api keys, api runs, external calls

Revision ID: 0004_api
Revises: 0001

"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import store.schema

revision = "0004_api"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("tools", sa.Text(), nullable=False),
        sa.Column("webhook_url", sa.Text(), nullable=True),
        sa.Column("webhook_secret", sa.String(length=100), nullable=True),
        sa.Column("created_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sa.UniqueConstraint("name", name=op.f("uq_api_keys_name")),
    )
    op.create_table(
        "api_calls",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("call_id", sa.String(length=100), nullable=False),
        sa.Column("tool", sa.String(length=100), nullable=False),
        sa.Column("args", sa.Text(), nullable=False),
        sa.Column("request_digest", sa.String(length=64), nullable=False),
        sa.Column("spend_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=True),
        sa.Column("expires_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("decided_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("lease_until", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("executed_at", store.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("recovery_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_api_calls_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "call_id", name=op.f("pk_api_calls")),
    )
    with op.batch_alter_table("api_calls", schema=None) as batch_op:
        batch_op.create_index(
            "ix_api_calls_executing_lease",
            ["lease_until"],
            unique=False,
            sqlite_where=sa.text("status = 'executing'"),
            postgresql_where=sa.text("status = 'executing'"),
        )
        batch_op.create_index("ix_api_calls_status", ["status"], unique=False)

    op.create_table(
        "api_runs",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=False),
        sa.Column("request_digest", sa.String(length=64), nullable=False),
        sa.Column("external", sa.Boolean(), nullable=False),
        sa.Column("created_at", store.schema.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_api_runs_key_id_api_keys")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_api_runs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_api_runs")),
        sa.UniqueConstraint("key_id", "idempotency_key", name="uq_api_runs_key_idempotency"),
    )


def downgrade() -> None:
    op.drop_table("api_runs")
    with op.batch_alter_table("api_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_api_calls_status")
        batch_op.drop_index(
            "ix_api_calls_executing_lease",
            sqlite_where=sa.text("status = 'executing'"),
            postgresql_where=sa.text("status = 'executing'"),
        )

    op.drop_table("api_calls")
    op.drop_table("api_keys")
