"""`/signoff help`: every subcommand, in the order `bot.ids.SUBCOMMANDS` lists them."""

from __future__ import annotations

from collections.abc import Sequence

from bot import ids
from bot.cards import mrkdwn

#: Longest example question shown (an app's examples are its own text, shown verbatim).
EXAMPLE_MAX = 200

#: Each subcommand's arguments (mrkdwn-escaped) and what it does.
USAGE: dict[str, tuple[str, str]] = {
    "ask": ("&lt;question&gt;", "start a run that answers your question"),
    "continue": ("&lt;run-id&gt;", "continue one of your halted runs, granting it more budget"),
    "status": ("&lt;run-id&gt;", "show where a run stands"),
    "list": ("", "your runs waiting for approval or halted"),
    "cancel": ("&lt;run-id&gt;", "cancel one of your runs"),
    "help": ("", "show this message"),
}


def help_text(examples: Sequence[str] = ()) -> str:
    """The reply to `/signoff help` (and to anything `/signoff` does not understand),
    with the app's example questions."""
    lines = ["*signoff* — approvals for agent runs. Commands:"]
    for name in ids.SUBCOMMANDS:
        args, what = USAGE[name]
        usage = f"{ids.COMMAND} {name} {args}".rstrip()
        lines.append(f"• `{usage}` — {what}")
    if examples:
        lines.append("Questions this app answers, for example:")
        lines += [f"• {mrkdwn.code(mrkdwn.clip(f'{ids.COMMAND} ask {e}', EXAMPLE_MAX))}"
                  for e in examples]
    return "\n".join(lines)
