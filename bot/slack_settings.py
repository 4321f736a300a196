"""The Slack settings: credentials, where the Web API is, and Socket Mode.

With ``SLACK_APP_TOKEN`` set, `signoff serve` takes events, interactivity and
the slash command over Socket Mode (no public URL); without it, over HTTP.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from bot.settings_base import MODEL_CONFIG, ConfigError, blank_is_unset, stripped_secret

__all__ = ["REQUIRED_FOR_SERVE", "SlackCredentials", "SlackSettings"]

#: Settings `signoff serve` cannot start without (see `SlackSettings.require_slack`).
REQUIRED_FOR_SERVE = frozenset({"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"})
APP_TOKEN_PREFIX = "xapp-"


class SlackCredentials(NamedTuple):
    """The two Slack secrets `signoff serve` needs, as plain strings for the Slack SDK."""

    bot_token: str
    signing_secret: str


class SlackSettings(BaseSettings):
    """The Slack group of `bot.config.Settings`. Secrets are `SecretStr`: never in a repr."""

    model_config = MODEL_CONFIG

    slack_bot_token: SecretStr | None = Field(
        None,
        validation_alias="SLACK_BOT_TOKEN",
        description="Bot user OAuth token (xoxb-...). Required by `signoff serve`.",
    )
    slack_signing_secret: SecretStr | None = Field(
        None,
        validation_alias="SLACK_SIGNING_SECRET",
        description="Signing secret used to verify that requests come from Slack. "
        "Required by `signoff serve`.",
    )
    slack_app_token: SecretStr | None = Field(
        None,
        validation_alias="SLACK_APP_TOKEN",
        description="App-level token (xapp-..., scope connections:write). Set: `signoff "
        "serve` receives events, clicks and commands over Socket Mode (no public URL; "
        "use manifest.socket.yml); HTTP still serves the health checks and /metrics.",
    )
    slack_api_url: str = Field(
        "https://slack.com/api/",
        validation_alias="SLACK_API_URL",
        description="Base URL of Slack's Web API (apps.connections.open included). Tests "
        "and the sandbox point it at a local stand-in.",
    )
    approvals_channel: str | None = Field(
        None,
        validation_alias="SIGNOFF_APPROVALS_CHANNEL",
        description="Channel id or name approval cards are posted to. Unset: each card "
        "is sent as a DM to the person who asked.",
    )

    @field_validator("slack_bot_token", "slack_signing_secret", mode="before")
    @classmethod
    def _blank_secret_is_unset(cls, value: object) -> object:
        return stripped_secret(value)

    @field_validator("slack_app_token", mode="before")
    @classmethod
    def _app_token(cls, value: object) -> object:
        value = stripped_secret(value)
        if isinstance(value, str) and not value.startswith(APP_TOKEN_PREFIX):
            # Never echo the value: it is a secret, even when it is the wrong one.
            raise ValueError(f"must be an app-level token ({APP_TOKEN_PREFIX}...), "
                             "from Basic Information -> App-Level Tokens")
        return value

    @field_validator("approvals_channel", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return blank_is_unset(value)

    @field_validator("slack_api_url")
    @classmethod
    def _api_base(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL, e.g. https://slack.com/api/")
        # The SDK appends the method name to the base URL.
        return value if value.endswith("/") else value + "/"

    @property
    def socket_mode(self) -> bool:
        """Whether Slack reaches this process over Socket Mode rather than HTTP."""
        return self.slack_app_token is not None

    def app_token(self) -> str:
        """The app-level token for Socket Mode; only call when `socket_mode` is true."""
        assert self.slack_app_token is not None
        return self.slack_app_token.get_secret_value()

    def require_slack(self) -> SlackCredentials:
        """The Slack token and signing secret, or `ConfigError` naming each one missing.

        Bolt builds an app with an empty signing secret and then rejects every
        request, so `signoff serve` calls this before it listens.
        """
        missing = [
            env
            for env, secret in (
                ("SLACK_BOT_TOKEN", self.slack_bot_token),
                ("SLACK_SIGNING_SECRET", self.slack_signing_secret),
            )
            if secret is None
        ]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            raise ConfigError(
                f"{' and '.join(missing)} {verb} not set. `signoff serve` needs the bot token "
                "(OAuth & Permissions -> Bot User OAuth Token, xoxb-...) and the signing secret "
                "(Basic Information -> App Credentials) of your Slack app; set them in the "
                "environment and start again. `signoff sandbox` runs without them."
            )
        assert self.slack_bot_token is not None and self.slack_signing_secret is not None
        return SlackCredentials(
            bot_token=self.slack_bot_token.get_secret_value(),
            signing_secret=self.slack_signing_secret.get_secret_value(),
        )
