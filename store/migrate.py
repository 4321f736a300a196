"""Schema migrations (Alembic, shipped inside the package).

Alembic's commands are synchronous; they run on our async engine's connection
through ``run_sync``, so ``signoff serve`` can migrate inside its event loop.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from store import errors
from store.engine import Database

_HERE = Path(__file__).parent / "migrations"


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


async def upgrade(db: Database, revision: str = "head") -> None:
    def _run(conn: Connection) -> None:
        command.upgrade(_config(conn), revision)

    async with db.write() as conn:
        await conn.run_sync(_run)


async def downgrade(db: Database, revision: str = "base") -> None:
    def _run(conn: Connection) -> None:
        command.downgrade(_config(conn), revision)

    async with db.write() as conn:
        await conn.run_sync(_run)


async def current(db: Database) -> str | None:
    """The revision the database is at, or None for an empty database."""

    def _read(conn: Connection) -> str | None:
        return MigrationContext.configure(conn).get_current_revision()

    async with db.read() as conn:
        return await conn.run_sync(_read)


async def require_head(db: Database) -> None:
    """Raise SchemaOutdated unless the database is at this code's head revision."""
    found, wanted = await current(db), head()
    if found != wanted:
        raise errors.SchemaOutdated(
            f"database schema is at {found or 'nothing (empty database)'}, this signoff needs "
            f"{wanted}: run `signoff db upgrade` (the Procfile's release step) first"
        )
