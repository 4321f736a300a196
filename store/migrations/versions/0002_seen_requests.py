"""seen requests: signed requests already let through, for refusing replays

Revision ID: 0002_seen_requests
Revises: 0001
Create Date: 2026-12-01 10:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_seen_requests"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seen_requests",
        sa.Column("stamp", sa.BigInteger(), nullable=False),
        sa.Column("signature", sa.String(length=80), nullable=False),
        sa.PrimaryKeyConstraint("stamp", "signature", name=op.f("pk_seen_requests")),
    )


def downgrade() -> None:
    op.drop_table("seen_requests")
