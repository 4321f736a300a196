"""`signoff runs list|show ID`: reading runs as stored."""

from __future__ import annotations

import argparse
from typing import Any

from bot import config, runs_report
from bot.cli_commands.common import EXIT_OK, add, open_db, positive_int
from store import runs
from store.states import RunState


async def list_runs(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await open_db(settings)
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


async def show(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await open_db(settings)
    try:
        detail = await runs_report.load_detail(db, args.run_id)
    finally:
        await db.dispose()
    print(runs_report.to_json(detail) if args.json else runs_report.run_text(detail))
    return EXIT_OK


def add_parser(commands: Any) -> None:
    runs_cmd = add(commands, "runs", "read runs from the database",
                   "Read runs as stored. Pending tokens are shown by prefix only.")
    sub = runs_cmd.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    listing = add(sub, "list", "list runs, newest first",
                  "List runs, newest first: id, state, reason, user, step, spend, tool calls, "
                  "last update and question.")
    listing.add_argument("--state", action="append", choices=[s.value for s in RunState],
                         help="only runs in this state (repeat for several)")
    listing.add_argument("--user", metavar="USER", help="only runs asked by this Slack user id")
    listing.add_argument("--limit", type=positive_int, default=50, metavar="N",
                         help="at most N runs (default: 50)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=list_runs)
    one = add(sub, "show", "show one run with its messages, events, ledger, approvals, outbox",
              "Show one run: every column (budget used against its limits), its messages, "
              "events, tool-call ledger, approvals and outbox rows. Exits 1 if there is no "
              "run with that id.")
    one.add_argument("run_id", metavar="ID", help="the run's id (see `signoff runs list`)")
    one.add_argument("--json", action="store_true", help="print JSON instead of text")
    one.set_defaults(run=show)
