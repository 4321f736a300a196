"""What people read when Slack refused an approval card for good."""

from __future__ import annotations

from bot.cards import mrkdwn

#: What to do about the refusals Slack gives most often for a card's channel.
_TODO = {
    "channel_not_found": "The approvals channel does not exist or was renamed: ask your Slack "
                         "admin to fix SIGNOFF_APPROVALS_CHANNEL.",
    "not_in_channel": "The bot is not in the approvals channel: invite it (/invite) there.",
    "is_archived": "The approvals channel is archived: ask your Slack admin to unarchive it or "
                   "set another one.",
}
_DEFAULT_TODO = "Ask whoever runs signoff to fix it and re-post the request."


def dead_card_dm(run_id: str, tool: str, error: str, channel: str | None) -> str:
    """The DM to a requester whose approval request never reached an approver."""
    where = f" in <#{channel}>" if channel and channel[:1] in ("C", "G") else ""
    todo = _TODO.get(error, _DEFAULT_TODO)
    return (
        f":warning: Your request to run {mrkdwn.code(tool)} could not be posted for approval"
        f"{where}: Slack said {mrkdwn.code(error)}. Nobody has been asked yet. {todo} "
        f"Run {mrkdwn.code(run_id)} keeps waiting until then, or until it expires."
    )


def card_not_posted(error: str | None) -> str:
    """The `/signoff status` line for a run whose approval card Slack refused."""
    said = f" (Slack said {mrkdwn.code(error)})" if error else ""
    return (f":warning: Its approval request could not be posted{said}, so no approver has "
            "seen it yet.")
