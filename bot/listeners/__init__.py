"""Slack listeners: each module has ``register(app, services)``; ``bot.app`` wires them."""

from bot.listeners import approvals, commands, decline_modal

__all__ = ["approvals", "commands", "decline_modal"]
