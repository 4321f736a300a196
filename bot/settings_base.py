"""What every group of settings shares: the error type, the model config, field helpers.

`bot.config.Settings` is assembled from groups (`bot.slack_settings` holds the
Slack ones); they all read the environment the same way, set up here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

__all__ = ["MODEL_CONFIG", "ConfigError", "blank_is_unset", "duration", "stripped_secret"]


class ConfigError(Exception):
    """signoff is not configured correctly: set the named variable(s) and start again."""


MODEL_CONFIG = SettingsConfigDict(
    # An empty variable means "unset": `SIGNOFF_APPROVALS_CHANNEL=` falls back to DMs.
    env_ignore_empty=True,
    # The process environment holds plenty that is not ours.
    extra="ignore",
    # `load_settings(port=0)` as well as `load_settings(PORT=0)`.
    populate_by_name=True,
    frozen=True,
)


def duration(default: float, env: str, description: str) -> Any:
    """A duration field: a positive, finite float (decimals allowed)."""
    return Field(default, validation_alias=env, gt=0, allow_inf_nan=False, description=description)


def stripped_secret(value: object) -> object:
    """A secret's raw value, trimmed; blank counts as unset."""
    if isinstance(value, str):
        return value.strip() or None
    return value


def blank_is_unset(value: object) -> object:
    if isinstance(value, str):
        return value.strip() or None
    return value
