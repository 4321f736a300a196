"""The `signoff` command: serve, sandbox, database migrations, and reading runs.

Each command group is a module in `bot.cli_commands` with an ``add_parser``;
`COMMANDS` lists them. Configuration is read once, here or in the command,
with `bot.config.load_settings()`; command options override the environment.
Errors a person can fix are printed as one `error: ...` line on stderr, never
as a traceback. Exit codes:

    0  done
    1  the thing asked for is not there, or the store refused (no run with that id)
    2  signoff is not set up: bad configuration, database missing or not migrated,
       or a command that is not available yet
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import textwrap
from collections.abc import Sequence
from importlib import metadata

from bot import config
from bot.api import keys_cli
from bot.cli_commands import db, mcp_gateway, outbox, runs, sandbox, serve
from bot.cli_commands.common import (
    EXIT_FAILED,
    EXIT_NOT_SET_UP,
    EXIT_OK,
    EXIT_UNREACHABLE,
    PROG,
    AsyncCommand,
    NotSetUp,
    describe,
    fail,
)
from store import errors

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_NOT_SET_UP", "EXIT_OK", "EXIT_UNREACHABLE",
           "build_parser", "main"]

#: Command groups, in `signoff --help` order. A new group is a module with ``add_parser``.
COMMANDS = (serve, sandbox, db, runs, outbox, keys_cli, mcp_gateway)

_EPILOG = """\
commands:
  signoff serve [--port N] [--host H]      the bot (HTTP or Socket Mode), with its jobs
  signoff sandbox [--port N] [--app M:A]   the bot, a local Slack stand-in and a demo app
          [--socket-mode]                  ... with the bot on Socket Mode
  signoff db upgrade                       migrate DATABASE_URL to head (creates ./signoff.db)
  signoff db current                       the database's revision, and whether it is head
  signoff runs list [--state S] [--json]   runs, newest first
  signoff runs show ID [--json]            one run with messages, events, ledger, outbox
  signoff outbox list [--dead]             Slack posts waiting, sent or dead, newest first
  signoff outbox retry ID                  deliver a dead row again once its cause is fixed
  signoff api-keys create|list|revoke      keys of the HTTP API under /api/v1/
  signoff mcp-gateway --upstream CMD       an MCP server's tools, gated calls asked in Slack

exit codes:
  0  done
  1  not found, or refused by the store (e.g. no run with that id)
  2  not set up: bad configuration; database or role missing or login refused;
     database not migrated; an app that does not load; a port already in use
  3  database unreachable: nothing answers at DATABASE_URL (try again once it is up)

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
    for group in COMMANDS:
        group.add_parser(commands)
    return parser


def _version() -> str:
    try:
        return metadata.version("signoff")
    except metadata.PackageNotFoundError:
        return "unknown"


def _dispatch(args: argparse.Namespace) -> int:
    if hasattr(args, "call"):
        result: int = args.call(args)
        return result
    command: AsyncCommand = args.run
    settings = config.load_settings()
    try:
        return asyncio.run(command(settings, args))
    except errors.DatabaseUnavailable as exc:
        where = describe(settings.database_url)
        raise type(exc)(f"{exc} (DATABASE_URL: {where})") from exc  # keeps DatabaseMissing


def main(argv: Sequence[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Stored text may not fit the terminal's encoding; escape it rather than crash.
        sys.stdout.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except config.ConfigError as exc:
        fail(str(exc), EXIT_NOT_SET_UP)
    except (NotSetUp, errors.DatabaseMissing) as exc:
        fail(str(exc), EXIT_NOT_SET_UP)
    except errors.DatabaseUnavailable as exc:
        fail(str(exc), EXIT_UNREACHABLE)
    except errors.StoreError as exc:  # RunNotFound, ...
        fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return 130
