"""Configuration: every setting signoff reads, from the environment.

The variable names are part of the external contract (DESIGN.md, "External
contract"); `signoff serve --help` prints them with `settings_help()`, and the
README's configuration table lists the same set (a test keeps them in sync).

Read settings once, at the edge, with `load_settings()`; pass the `Settings`
object (or the values it holds) inward. Nothing below `bot/` reads the
environment.
"""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any, NamedTuple

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from resume import runtime

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ConfigError",
    "Settings",
    "SlackCredentials",
    "load_settings",
    "settings_help",
    "settings_rows",
]

#: Accepted DATABASE_URL schemes, and the spellings normalised to them
#: (Heroku-style `postgres://` URLs and plain `sqlite://` URLs name no async driver).
_DRIVER_ALIASES = {
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "sqlite": "sqlite+aiosqlite",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}

#: The model asked for when SIGNOFF_MODEL_URL is set but SIGNOFF_MODEL_NAME is not.
DEFAULT_MODEL_NAME = "gpt-4o-mini"

#: Settings `signoff serve` cannot start without (see `Settings.require_slack`).
_REQUIRED_FOR_SERVE = frozenset({"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"})

#: Settings whose values never appear in an error message.
_SECRETS = _REQUIRED_FOR_SERVE | {"SIGNOFF_MODEL_API_KEY", "DATABASE_URL"}


class ConfigError(Exception):
    """signoff is not configured correctly: set the named variable(s) and start again."""


class SlackCredentials(NamedTuple):
    """The two Slack secrets `signoff serve` needs, as plain strings for the Slack SDK."""

    bot_token: str
    signing_secret: str


def _positive(default: float, env: str, description: str) -> Any:
    """A duration field: a positive, finite float (decimals allowed)."""
    return Field(default, validation_alias=env, gt=0, allow_inf_nan=False, description=description)


class Settings(BaseSettings):
    """All of signoff's settings. Each field is read from the variable named by its alias.

    Secrets are `SecretStr` so they never appear in a repr or a log line;
    `require_slack()` hands them out as plain strings.
    """

    model_config = SettingsConfigDict(
        # An empty variable means "unset": `SIGNOFF_APPROVALS_CHANNEL=` falls back to DMs.
        env_ignore_empty=True,
        # The process environment holds plenty that is not ours.
        extra="ignore",
        # `load_settings(port=0)` as well as `load_settings(PORT=0)`.
        populate_by_name=True,
        frozen=True,
    )

    # --- Slack ----------------------------------------------------------------
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
    slack_api_url: str = Field(
        "https://slack.com/api/",
        validation_alias="SLACK_API_URL",
        description="Base URL of Slack's Web API. Tests and the sandbox point it at a "
        "local stand-in.",
    )
    approvals_channel: str | None = Field(
        None,
        validation_alias="SIGNOFF_APPROVALS_CHANNEL",
        description="Channel id or name approval cards are posted to. Unset: each card "
        "is sent as a DM to the person who asked.",
    )

    # --- Process --------------------------------------------------------------
    database_url: str = Field(
        "sqlite+aiosqlite:///./signoff.db",
        validation_alias="DATABASE_URL",
        description="SQLite (one process) or PostgreSQL (any number of replicas). "
        "postgres:// and postgresql:// URLs are read as postgresql+asyncpg://.",
    )
    host: str = Field(
        "0.0.0.0",  # A server in a container must listen on every interface.
        validation_alias="SIGNOFF_HOST",
        description="Interface `signoff serve` listens on.",
    )
    port: int = Field(
        3000, validation_alias="PORT", ge=1, le=65535, description="HTTP port of `signoff serve`."
    )
    app: str = Field(
        "examples.quotes:app",
        validation_alias="SIGNOFF_APP",
        description="`module:attribute` of the app that defines the tools and the agent.",
    )

    # --- Runs -----------------------------------------------------------------
    # The suspension window bounds how stale an approved artefact can be. A
    # person approves the preview as it was rendered when the card went out;
    # the longer a request waits, the further the world can drift from what
    # they saw. Re-rendering and comparing digests on resume catches drift the
    # preview shows, not drift it does not; expiry bounds the rest. This is a
    # safety bound, not a convenience setting: lengthen it only if acting on a
    # preview that old is acceptable for every tool that asks for approval.
    suspension_ttl_minutes: float = _positive(
        runtime.SUSPENSION_TTL_MINUTES,
        "SIGNOFF_SUSPENSION_TTL_MINUTES",
        "Minutes a pending request waits for a click before the run halts "
        "(suspension_expired). Bounds how stale an approved preview can be.",
    )
    orphan_after_seconds: float = _positive(
        runtime.ORPHAN_AFTER_SECONDS,
        "SIGNOFF_ORPHAN_AFTER_SECONDS",
        "Seconds without a heartbeat after which a running run is an orphan and is "
        "recovered by another process.",
    )
    max_recovery_attempts: int = Field(
        runtime.MAX_RECOVERY_ATTEMPTS,
        validation_alias="SIGNOFF_MAX_RECOVERY_ATTEMPTS",
        ge=1,
        description="Recoveries of one run before it fails (recovery_exhausted).",
    )
    retention_days: float = _positive(
        runtime.RETENTION_DAYS,
        "SIGNOFF_RETENTION_DAYS",
        "Days halted and failed runs are kept before they are purged.",
    )
    max_concurrent_runs: int = Field(
        8,
        validation_alias="SIGNOFF_MAX_CONCURRENT_RUNS",
        ge=1,
        description="Runs this process works on at once after a click, an ask or a "
        "continue; more wait their turn (at most a third of "
        "SIGNOFF_ORPHAN_AFTER_SECONDS), so a burst of clicks cannot delay the acks.",
    )

    # --- Scheduled jobs -------------------------------------------------------
    expiry_interval_seconds: float = _positive(
        30, "SIGNOFF_EXPIRY_INTERVAL_SECONDS", "Seconds between passes that expire suspensions."
    )
    reaper_interval_seconds: float = _positive(
        60,
        "SIGNOFF_REAPER_INTERVAL_SECONDS",
        "Seconds between passes that recover orphaned runs (one pass also runs at start).",
    )
    outbox_interval_seconds: float = _positive(
        2, "SIGNOFF_OUTBOX_INTERVAL_SECONDS", "Seconds between outbox deliveries to Slack."
    )
    outbox_max_attempts: int = Field(
        8,
        validation_alias="SIGNOFF_OUTBOX_MAX_ATTEMPTS",
        ge=1,
        description="Delivery attempts of one Slack message before it is marked dead "
        "and an error is logged.",
    )
    purge_interval_hours: float = _positive(
        24,
        "SIGNOFF_PURGE_INTERVAL_HOURS",
        "Hours between passes that purge halted and failed runs past retention.",
    )

    # --- Model (optional; used by apps that call an LLM) ----------------------
    model_url: str | None = Field(
        None,
        validation_alias="SIGNOFF_MODEL_URL",
        description="Base URL of an OpenAI-compatible model API, used (by the example apps) "
        "when SIGNOFF_MODEL_API_KEY is set too. Unset: the app's own model.",
    )
    model_api_key: SecretStr | None = Field(
        None,
        validation_alias="SIGNOFF_MODEL_API_KEY",
        description="API key for SIGNOFF_MODEL_URL (both are needed).",
    )
    model_name: str = Field(
        DEFAULT_MODEL_NAME,
        validation_alias="SIGNOFF_MODEL_NAME",
        description="Model name sent to that API.",
    )

    @field_validator("slack_bot_token", "slack_signing_secret", "model_api_key", mode="before")
    @classmethod
    def _blank_secret_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator("approvals_channel", "model_url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("model_name", mode="before")
    @classmethod
    def _blank_name_is_the_default(cls, value: object) -> object:
        if isinstance(value, str):
            return value.strip() or DEFAULT_MODEL_NAME
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        scheme, sep, rest = value.strip().partition("://")
        driver = _DRIVER_ALIASES.get(scheme.lower()) if sep else None
        if driver is None:
            # Name the scheme only: the rest of the URL may hold a password.
            raise ValueError(
                f"unsupported scheme {scheme!r}; use sqlite+aiosqlite:///PATH "
                "or postgresql+asyncpg://USER@HOST:PORT/DB"
            )
        return f"{driver}://{rest}"

    @field_validator("slack_api_url")
    @classmethod
    def _api_base(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL, e.g. https://slack.com/api/")
        # The SDK appends the method name to the base URL.
        return value if value.endswith("/") else value + "/"

    @field_validator("app")
    @classmethod
    def _module_attr(cls, value: str) -> str:
        module, sep, attr = value.strip().partition(":")
        if not (sep and module and attr.isidentifier()):
            raise ValueError("expected module:attribute, e.g. examples.quotes:app")
        return value.strip()

    # --- Derived values -------------------------------------------------------

    @property
    def suspension_ttl(self) -> timedelta:
        """How long a pending request may wait (see the comment on the field)."""
        return timedelta(minutes=self.suspension_ttl_minutes)

    @property
    def orphan_after(self) -> timedelta:
        """Heartbeat age beyond which a running run is an orphan."""
        return timedelta(seconds=self.orphan_after_seconds)

    @property
    def retention(self) -> timedelta:
        """Age beyond which halted and failed runs are purged."""
        return timedelta(days=self.retention_days)

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


def _env_name(field: str) -> str:
    alias = Settings.model_fields[field].validation_alias
    assert isinstance(alias, str), f"every setting has a string alias; {field} does not"
    return alias


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with `overrides` (by field or variable name) on top.

    An invalid value raises `ConfigError` naming the variable and what is wrong
    with it, so a misconfigured process stops at start with one readable line
    per problem.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = str(error["loc"][0]) if error["loc"] else "?"
            env = _env_name(loc) if loc in Settings.model_fields else loc
            message = error["msg"].removeprefix("Value error, ")
            if env not in _SECRETS and "input" in error and isinstance(error["input"], str):
                message += f" (got {error['input']!r})"
            lines.append(f"{env}: {message}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from exc


def _default_text(env: str, default: object) -> str:
    if env in _REQUIRED_FOR_SERVE:
        return "required"
    if default is None:
        return "unset"
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def settings_rows() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, in declaration order."""
    return [
        (_env_name(name), _default_text(_env_name(name), info.default), info.description or "")
        for name, info in Settings.model_fields.items()
    ]


def settings_help(width: int = 100) -> str:
    """A plain-text table of every setting, for `signoff serve --help`.

    Print it with a raw formatter (argparse's `RawDescriptionHelpFormatter`):
    the columns are already laid out and descriptions wrapped to `width`.
    """
    rows = [("VARIABLE", "DEFAULT", "MEANING"), *settings_rows()]
    env_w = max(len(row[0]) for row in rows)
    default_w = max(len(row[1]) for row in rows)
    desc_w = max(30, width - env_w - default_w - 4)
    lines = []
    for env, default, description in rows:
        wrapped = textwrap.wrap(description, desc_w) or [""]
        lines.append(f"{env:<{env_w}}  {default:<{default_w}}  {wrapped[0]}".rstrip())
        pad = " " * (env_w + default_w + 4)
        lines.extend(pad + more for more in wrapped[1:])
    return "\n".join(lines)
