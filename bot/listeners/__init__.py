"""Slack listeners: module-level callbacks that reach the services through Bolt's context.

As in Slack's bolt-python starter template, each feature module has
``register(app)``, which only attaches its callbacks; ``register`` here calls them all.
"""

from slack_bolt.async_app import AsyncApp

from bot.listeners import buttons, commands, decline_reason

__all__ = ["buttons", "commands", "decline_reason", "register"]


def register(app: AsyncApp) -> None:
    """Attach every listener; the services come from the middleware ``bot.bolt_app`` installs."""
    buttons.register(app)
    decline_reason.register(app)
    commands.register(app)
