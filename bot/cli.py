"""The `signoff` command: serve, sandbox, database migrations, and reading runs.

Configuration is read once, here, with `bot.config.load_settings()`; command
options override the environment. Errors a person can fix are printed as one
`error: ...` line on stderr, never as a traceback. Exit codes:

    0  done
    1  the thing asked for is not there, or the store refused (no run with that id)
    2  signoff is not set up: bad configuration, database missing or not migrated,
       or a command that is not available yet
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import io
import sys
import textwrap
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from bot import config, runs_report
from bot.api import keys_cli
from store import engine, errors, migrate, runs
from store.engine import Database
from store.states import RunState

PROG = "signoff"
EXIT_OK, EXIT_FAILED, EXIT_NOT_SET_UP = 0, 1, 2
_UPGRADE_HINT = "run `signoff db upgrade` first"


class NotSetUp(Exception):
    """The database is missing or behind this code's schema; the message says what to run."""


# --- Database helpers ----------------------------------------------------------------------


def _sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names (`sqlite+aiosqlite:///./signoff.db` -> ./signoff.db)."""
    scheme, sep, rest = url.partition("://")
    if not (sep and scheme.startswith("sqlite")) or not rest.startswith("/"):
        return None
    path = rest[1:].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def _sqlite_path(url: str) -> Path | None:
    name = _sqlite_file(url)
    return Path(name) if name is not None else None


def _describe(url: str) -> str:
    """The database for a message: a SQLite file's path, or a URL without its password."""
    name = _sqlite_file(url)
    if name is not None:
        return name
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


async def _open(settings: config.Settings) -> Database:
    """Connect for reading; NotSetUp when there is no database or it is not migrated."""
    path = _sqlite_path(settings.database_url)
    if path is not None and not path.exists():
        # Connecting would create an empty file: say what is wrong instead.
        raise NotSetUp(f"no database at {path}: {_UPGRADE_HINT}")
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


# --- Commands ------------------------------------------------------------------------------


async def db_upgrade(settings: config.Settings, _args: argparse.Namespace) -> int:
    db = engine.connect(settings.database_url)
    try:
        before = await migrate.current(db)
        await migrate.upgrade(db)
        after = await migrate.current(db)
    finally:
        await db.dispose()
    where = _describe(settings.database_url)
    if before == after:
        print(f"{where}: already at revision {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'nothing (empty database)'} to {after} (head)")
    return EXIT_OK


async def db_current(settings: config.Settings, _args: argparse.Namespace) -> int:
    where, head = _describe(settings.database_url), migrate.head()
    path = _sqlite_path(settings.database_url)
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
          f"{_UPGRADE_HINT}")
    return EXIT_NOT_SET_UP


async def runs_list(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await _open(settings)
    try:
        states = [RunState(s) for s in args.state or ()]
        found = await runs.list_runs(db, states=states, user_id=args.user, limit=args.limit)
    finally:
        await db.dispose()
    if args.json:
        print(runs_report.to_json(found))
    elif not found:
        filtered = " matching these filters" if (states or args.user) else " yet"
        print(f"no runs{filtered}")
    else:
        print(runs_report.runs_table(found))
    return EXIT_OK


async def runs_show(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await _open(settings)
    try:
        detail = await runs_report.load_detail(db, args.run_id)
    finally:
        await db.dispose()
    print(runs_report.to_json(detail) if args.json else runs_report.run_text(detail))
    return EXIT_OK


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


def _call(command: str, module_name: str, *args: Any) -> int:
    entry = _entry_point(module_name)
    if entry is None:
        _fail(f"`{PROG} {command}` is not available yet ({module_name} is not written)",
              EXIT_NOT_SET_UP)
    result = entry(*args)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return result if isinstance(result, int) else EXIT_OK


def serve(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("port", args.port), ("host", args.host)) if v is not None}
    return _call("serve", "bot.server", config.load_settings(**overrides))


def sandbox(args: argparse.Namespace) -> int:
    # Through the settings, so --app and --database-url are validated like the variables.
    overrides = {k: v for k, v in (("app", args.app), ("database_url", args.database_url)) if v}
    settings = config.load_settings(**overrides)
    return _call("sandbox", "bot.sandbox.app", settings, settings.app, args.port)


# --- Parser --------------------------------------------------------------------------------

AsyncCommand = Callable[[config.Settings, argparse.Namespace], Coroutine[Any, Any, int]]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _add(
    subparsers: Any, name: str, help_text: str, description: str | None = None, **kw: Any
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=description or help_text, **kw
    )
    return parser


def _db_parser(commands: Any) -> None:
    db = _add(commands, "db", "database schema migrations",
              "Manage the database schema (DATABASE_URL; default ./signoff.db).")
    sub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    upgrade = _add(sub, "upgrade", "apply migrations up to head (creates the SQLite file)",
                   "Apply every migration the database lacks, then print the revision it moved "
                   "from and to. Safe to run repeatedly; run it before each deploy (the "
                   "Procfile's release step).")
    upgrade.set_defaults(run=db_upgrade)
    current = _add(sub, "current", "print the database's revision and whether it is at head",
                   "Print the database's schema revision and whether it is at this signoff's "
                   "head. Exits 2 when the database is empty or behind.")
    current.set_defaults(run=db_current)


def _runs_parser(commands: Any) -> None:
    runs_cmd = _add(commands, "runs", "read runs from the database",
                    "Read runs as stored. Pending tokens are shown by prefix only.")
    sub = runs_cmd.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    listing = _add(sub, "list", "list runs, newest first",
                   "List runs, newest first: id, state, reason, user, step, spend, tool calls, "
                   "last update and question.")
    listing.add_argument("--state", action="append", choices=[s.value for s in RunState],
                         help="only runs in this state (repeat for several)")
    listing.add_argument("--user", metavar="USER", help="only runs asked by this Slack user id")
    listing.add_argument("--limit", type=_positive_int, default=50, metavar="N",
                         help="at most N runs (default: 50)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=runs_list)
    show = _add(sub, "show", "show one run with its messages, events, ledger, approvals, outbox",
                "Show one run: every column (budget used against its limits), its messages, "
                "events, tool-call ledger, approvals and outbox rows. Exits 1 if there is no "
                "run with that id.")
    show.add_argument("run_id", metavar="ID", help="the run's id (see `signoff runs list`)")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(run=runs_show)


def _process_parsers(commands: Any) -> None:
    serve_cmd = _add(
        commands, "serve", "run the bot over HTTP, with its scheduled jobs",
        textwrap.fill(
            "Run the bot: Slack events, interactivity and commands on POST /slack/events, "
            "GET /healthz and /readyz, plus the expiry, reaper, outbox and purge jobs (one "
            "reaper pass at start; the purge runs daily by default). Options override the "
            "environment.", 100,
        ) + "\n\nSettings, read from the environment:\n\n" + config.settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_cmd.add_argument("--port", type=int, help="listen on this port (default: PORT, 3000)")
    serve_cmd.add_argument("--host", help="listen on this interface (default: SIGNOFF_HOST)")
    serve_cmd.set_defaults(call=serve)
    box = _add(commands, "sandbox", "run a demo app against a local Slack stand-in",
               "Run the bot, a local Slack stand-in and a demo app together: no Slack "
               "workspace needed.")
    box.add_argument("--port", type=int, default=3000, help="HTTP port (default: 3000)")
    box.add_argument("--app", metavar="MODULE:ATTR",
                     help="app to run (default: SIGNOFF_APP, else examples.quotes:app)")
    box.add_argument("--database-url", metavar="URL",
                     help="database to use (default: DATABASE_URL, else ./signoff-sandbox.db)")
    box.set_defaults(call=sandbox)


_EPILOG = """\
commands:
  signoff serve [--port N] [--host H]      the bot over HTTP, with its scheduled jobs
  signoff sandbox [--port N] [--app M:A]   the bot, a local Slack stand-in and a demo app
  signoff db upgrade                       migrate DATABASE_URL to head (creates ./signoff.db)
  signoff db current                       the database's revision, and whether it is head
  signoff runs list [--state S] [--json]   runs, newest first
  signoff runs show ID [--json]            one run with messages, events, ledger, outbox
  signoff api-keys create|list|revoke      keys of the HTTP API under /api/v1/

exit codes:
  0  done
  1  not found, or refused by the store (e.g. no run with that id)
  2  not set up: bad configuration, database missing or not migrated

`signoff COMMAND --help` describes each command; `signoff serve --help` lists every setting."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill(
            "signoff: Slack approvals for AI agent runs. A run that needs approval suspends "
            "durably; a person approves or declines in Slack; the run resumes exactly once.", 80,
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _process_parsers(commands)
    _db_parser(commands)
    _runs_parser(commands)
    keys_cli.add_parser(commands)
    return parser


def _version() -> str:
    try:
        return metadata.version("signoff")
    except metadata.PackageNotFoundError:
        return "unknown"


# --- Entry point ---------------------------------------------------------------------------


def _fail(message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _dispatch(args: argparse.Namespace) -> int:
    if hasattr(args, "call"):
        result: int = args.call(args)
        return result
    command: AsyncCommand = args.run
    settings = config.load_settings()
    try:
        return asyncio.run(command(settings, args))
    except errors.DatabaseUnavailable as exc:
        where = _describe(settings.database_url)
        raise errors.DatabaseUnavailable(f"{exc} (DATABASE_URL: {where})") from exc


def main(argv: Sequence[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Stored text may not fit the terminal's encoding; escape it rather than crash.
        sys.stdout.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except config.ConfigError as exc:
        _fail(str(exc), EXIT_NOT_SET_UP)
    except NotSetUp as exc:
        _fail(str(exc), EXIT_NOT_SET_UP)
    except errors.StoreError as exc:  # RunNotFound, DatabaseUnavailable, ...
        _fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return 130
