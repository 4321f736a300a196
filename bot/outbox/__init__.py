"""The outbox, Slack side: the relay that delivers due rows, and the sender of one row."""

from bot.outbox import attempt, failures, relay, slack_sender

__all__ = ["attempt", "failures", "relay", "slack_sender"]
