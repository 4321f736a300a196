"""outbox owner: a taken row is held by its deliverer's heartbeat, as runs are

Revision ID: 0003_outbox_owner
Revises: 0002_seen_requests
Create Date: 2026-12-01 11:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import store.schema

revision = "0003_outbox_owner"
down_revision = "0002_seen_requests"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("owner_id", sa.String(length=64), nullable=True))
        batch.add_column(
            sa.Column("heartbeat_at", store.schema.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("owner_id")
