"""Configuration: every setting signoff reads, from the environment.

The variable names are part of signoff's external contract: deployments set them, so
they are never renamed. `signoff serve --help` prints them with `settings_help()`, and
the README's configuration table lists the same set (a test keeps them in sync).

Read settings once, at the edge, with `load_settings()`; pass the `Settings`
object (or the values it holds) inward. Nothing below `bot/` reads the
environment.
"""

from __future__ import annotations

import urllib.parse
from datetime import timedelta
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator

from bot import settings_table
from bot.settings_base import ConfigError, blank_is_unset, stripped_secret
from bot.settings_base import duration as _positive
from bot.slack_settings import REQUIRED_FOR_SERVE, SlackCredentials, SlackSettings
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

#: Settings whose values never appear in an error message.
_SECRETS = REQUIRED_FOR_SERVE | {
    "SLACK_APP_TOKEN", "SIGNOFF_MODEL_API_KEY", "SIGNOFF_METRICS_TOKEN", "DATABASE_URL"}


class Settings(SlackSettings):
    """All of signoff's settings. Each field is read from the variable named by its alias.

    The Slack group (credentials, Socket Mode, the Web API's URL) comes first,
    from `bot.slack_settings`; secrets are `SecretStr` so they never appear in
    a repr or a log line.
    """

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
    log_format: Literal["text", "json"] = Field(
        "text",
        validation_alias="SIGNOFF_LOG_FORMAT",
        description="text: one readable line per log record. json: one JSON object per "
        "line (timestamp, level, logger, message, run_id, action, user, ...).",
    )
    metrics_token: SecretStr | None = Field(
        None,
        validation_alias="SIGNOFF_METRICS_TOKEN",
        description="Bearer token GET /metrics requires. Unset: /metrics answers only "
        "scrapes from the loopback interface (127.0.0.1, ::1); others get 403.",
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
    execution_lease_seconds: float = _positive(
        runtime.EXECUTION_LEASE_SECONDS,
        "SIGNOFF_EXECUTION_LEASE_SECONDS",
        "Seconds an API agent's execution claim holds without a heartbeat or a result; "
        "then the call is unknown, to be reconciled, never run again.",
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

    @field_validator("model_api_key", "metrics_token", mode="before")
    @classmethod
    def _blank_key_is_unset(cls, value: object) -> object:
        return stripped_secret(value)

    @field_validator("model_url", mode="before")
    @classmethod
    def _blank_url_is_unset(cls, value: object) -> object:
        return blank_is_unset(value)

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
    def execution_lease(self) -> timedelta:
        """How long an API agent's execution claim holds unheard from."""
        return timedelta(seconds=self.execution_lease_seconds)

    @property
    def retention(self) -> timedelta:
        """Age beyond which halted and failed runs are purged."""
        return timedelta(days=self.retention_days)

    def secret_values(self) -> list[str]:
        """Every secret set (tokens, keys, the database password), for log redaction."""
        values = [getattr(self, name).get_secret_value() for name, info in
                  type(self).model_fields.items()
                  if info.annotation == SecretStr | None and getattr(self, name) is not None]
        password = urllib.parse.urlsplit(self.database_url).password
        return values + ([password] if password else [])


def _env_name(field: str) -> str:
    return settings_table.env_name(Settings, field)


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


def settings_rows() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, in declaration order."""
    return settings_table.rows(Settings, REQUIRED_FOR_SERVE)


def settings_help(width: int = 100) -> str:
    """A plain-text table of every setting, for `signoff serve --help` (a raw formatter)."""
    return settings_table.help_text(settings_rows(), width)
