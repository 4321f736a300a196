"""`signoff outbox list [--dead] | retry ID`: what is waiting to reach Slack, and re-posting."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from bot import config, runs_report
from bot.cli_commands.common import EXIT_FAILED, EXIT_OK, add, fail, open_db, positive_int
from store import outbox
from store.records import OutboxRow
from store.states import OutboxState


def _rows_table(rows: list[OutboxRow]) -> str:
    return runs_report.table(
        ["ID", "KIND", "RUN", "STATE", "ATTEMPTS", "NEXT (UTC)", "LAST ERROR"],
        [[str(r.id), r.kind, r.run_id, r.state.value, str(r.attempts),
          runs_report.next_attempt(r), runs_report.one_line(r.last_error)] for r in rows],
    )


async def list_rows(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await open_db(settings)
    try:
        state = OutboxState.dead if args.dead else None
        rows = await outbox.listing(db, state=state, limit=args.limit)
    finally:
        await db.dispose()
    if not rows:
        print("no dead outbox rows" if args.dead else "the outbox is empty")
    else:
        print(_rows_table(rows))
    return EXIT_OK


async def retry(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await open_db(settings)
    try:
        revived = await outbox.retry_dead(db, args.row_id, now=datetime.now(UTC))
        found = revived or await outbox.get(db, args.row_id)
    finally:
        await db.dispose()
    if revived is None:
        if found is None:
            fail(f"no outbox row {args.row_id} (see `signoff outbox list`)", EXIT_FAILED)
        fail(f"outbox row {args.row_id} is {found.state.value}, not dead: only dead rows are "
             "retried", EXIT_FAILED)
    print(f"outbox row {revived.id} ({revived.kind}, run {revived.run_id}) is due again: "
          "a running `signoff serve` delivers it on its next outbox pass")
    return EXIT_OK


def add_parser(commands: Any) -> None:
    box = add(commands, "outbox", "list what is waiting to reach Slack, and retry dead rows",
              "Every Slack post or update signoff makes goes through the outbox. A row Slack "
              "refused for good (channel_not_found, not_in_channel, ...) is dead: fix the cause, "
              "then retry it.")
    sub = box.add_subparsers(dest="outbox_command", metavar="COMMAND", required=True)
    listing = add(sub, "list", "list outbox rows, newest first",
                  "List outbox rows, newest first: id, kind, run, state, attempts, next attempt "
                  "(pending rows only) and Slack's last error.")
    listing.add_argument("--dead", action="store_true", help="only rows Slack refused for good")
    listing.add_argument("--limit", type=positive_int, default=50, metavar="N",
                         help="at most N rows (default: 50)")
    listing.set_defaults(run=list_rows)
    again = add(sub, "retry", "make a dead row due again",
                "Make a dead outbox row due again, once its cause is fixed (the bot invited to "
                "the channel, the channel id corrected). The running bot delivers it; a card "
                "whose request was settled meanwhile is posted without buttons. Exits 1 if the "
                "row does not exist or is not dead.")
    again.add_argument("row_id", metavar="ID", type=positive_int,
                       help="the row's id (see `signoff outbox list --dead`)")
    again.set_defaults(run=retry)
