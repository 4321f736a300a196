"""What the command groups share: exit codes, parser helpers, opening the database."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
import urllib.parse
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn

from bot import config
from store import engine, errors, migrate
from store.engine import Database

PROG = "signoff"
EXIT_OK, EXIT_FAILED, EXIT_NOT_SET_UP, EXIT_UNREACHABLE = 0, 1, 2, 3
UPGRADE_HINT = "run `signoff db upgrade` first"

AsyncCommand = Callable[[config.Settings, argparse.Namespace], Coroutine[Any, Any, int]]


class NotSetUp(Exception):
    """The database is missing or behind this code's schema; the message says what to run."""


def fail(message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


# --- Parser helpers ----------------------------------------------------------------------


def add(
    subparsers: Any, name: str, help_text: str, description: str | None = None, **kw: Any
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=description or help_text, **kw
    )
    return parser


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def add_app_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app-dir", metavar="DIR", default=".",
                        help="look for the app's module in DIR first (default: the current "
                        "folder, as uvicorn and gunicorn do)")


def use_app_dir(folder: str) -> None:
    """Put ``folder`` first on the import path, so ``myapp:app`` finds ./myapp.py."""
    path = str(Path(folder).resolve())
    if not Path(path).is_dir():
        fail(f"--app-dir {folder}: no such folder", EXIT_FAILED)
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)


# --- Database helpers --------------------------------------------------------------------


def sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names (`sqlite+aiosqlite:///./signoff.db` -> ./signoff.db)."""
    scheme, sep, rest = url.partition("://")
    if not (sep and scheme.startswith("sqlite")) or not rest.startswith("/"):
        return None
    path = rest[1:].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def sqlite_path(url: str) -> Path | None:
    name = sqlite_file(url)
    return Path(name) if name is not None else None


def describe(url: str) -> str:
    """The database for a message: a SQLite file's path, or a URL without its password."""
    name = sqlite_file(url)
    if name is not None:
        return name
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


async def open_db(settings: config.Settings) -> Database:
    """Connect for reading; NotSetUp when there is no database or it is not migrated."""
    path = sqlite_path(settings.database_url)
    if path is not None and not path.exists():
        # Connecting would create an empty file: say what is wrong instead.
        raise NotSetUp(f"no database at {path}: {UPGRADE_HINT}")
    db = engine.connect(settings.database_url)
    try:
        await migrate.require_head(db)
    except errors.SchemaOutdated as exc:
        await db.dispose()
        raise NotSetUp(str(exc)) from exc
    except BaseException:
        await db.dispose()
        raise
    return db


# --- Entry points of long-running commands ------------------------------------------------


def _entry_point(module_name: str) -> Callable[..., Any] | None:
    """`module.main`, or None while that module has not been written yet."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # The module exists; something it imports does not.
        return None
    entry: Callable[..., Any] = module.main
    return entry


def call_main(command: str, module_name: str, *args: Any) -> int:
    """`module_name.main(*args)` (awaited if it is a coroutine) as the command's exit code."""
    entry = _entry_point(module_name)
    if entry is None:
        fail(f"`{PROG} {command}` is not available yet ({module_name} is not written)",
             EXIT_NOT_SET_UP)
    result = entry(*args)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return result if isinstance(result, int) else EXIT_OK
