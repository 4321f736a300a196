"""`/signoff help`: every subcommand, in the order `bot.ids.SUBCOMMANDS` lists them."""

from __future__ import annotations

from bot import ids

#: Each subcommand's arguments (mrkdwn-escaped) and what it does.
USAGE: dict[str, tuple[str, str]] = {
    "ask": ("&lt;question&gt;", "start a run that answers your question"),
    "continue": ("&lt;run-id&gt;", "continue one of your halted runs, granting it more budget"),
    "status": ("&lt;run-id&gt;", "show where a run stands"),
    "list": ("", "your runs waiting for approval or halted"),
    "cancel": ("&lt;run-id&gt;", "cancel one of your runs"),
    "help": ("", "show this message"),
}


def help_text() -> str:
    """The reply to `/signoff help` (and to anything `/signoff` does not understand)."""
    lines = ["*signoff* — approvals for agent runs. Commands:"]
    for name in ids.SUBCOMMANDS:
        args, what = USAGE[name]
        usage = f"{ids.COMMAND} {name} {args}".rstrip()
        lines.append(f"• `{usage}` — {what}")
    return "\n".join(lines)
