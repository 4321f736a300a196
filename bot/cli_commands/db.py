"""`signoff db upgrade|current`: the schema migrations."""

from __future__ import annotations

import argparse
from typing import Any

from bot import config
from bot.cli_commands.common import (
    EXIT_NOT_SET_UP,
    EXIT_OK,
    UPGRADE_HINT,
    add,
    describe,
    sqlite_path,
)
from store import engine, migrate


async def upgrade(settings: config.Settings, _args: argparse.Namespace) -> int:
    db = engine.connect(settings.database_url)
    try:
        before = await migrate.current(db)
        await migrate.upgrade(db)
        after = await migrate.current(db)
    finally:
        await db.dispose()
    where = describe(settings.database_url)
    if before == after:
        print(f"{where}: already at revision {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'nothing (empty database)'} to {after} (head)")
    return EXIT_OK


async def current(settings: config.Settings, _args: argparse.Namespace) -> int:
    where, head = describe(settings.database_url), migrate.head()
    path = sqlite_path(settings.database_url)
    found: str | None = None
    if path is None or path.exists():
        db = engine.connect(settings.database_url)
        try:
            found = await migrate.current(db)
        finally:
            await db.dispose()
    if found == head:
        print(f"{where}: revision {found} (head)")
        return EXIT_OK
    print(f"{where}: revision {found or 'none (empty database)'}; this signoff needs {head}: "
          f"{UPGRADE_HINT}")
    return EXIT_NOT_SET_UP


def add_parser(commands: Any) -> None:
    db = add(commands, "db", "database schema migrations",
             "Manage the database schema (DATABASE_URL; default ./signoff.db).")
    sub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    up = add(sub, "upgrade", "apply migrations up to head (creates the SQLite file)",
             "Apply every migration the database lacks, then print the revision it moved "
             "from and to. Safe to run repeatedly; run it before each deploy (the "
             "Procfile's release step).")
    up.set_defaults(run=upgrade)
    cur = add(sub, "current", "print the database's revision and whether it is at head",
              "Print the database's schema revision and whether it is at this signoff's "
              "head. Exits 2 when the database is empty or behind.")
    cur.set_defaults(run=current)
