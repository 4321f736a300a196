"""Settings are read from the environment under the names of signoff's external contract."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot import config

REPO = Path(__file__).parents[2]

CONTRACT_DEFAULTS = {
    "SLACK_API_URL": "https://slack.com/api/",
    "DATABASE_URL": "sqlite+aiosqlite:///./signoff.db",
    "PORT": "3000",
    "SIGNOFF_APP": "examples.quotes:app",
    "SIGNOFF_SUSPENSION_TTL_MINUTES": "30",
    "SIGNOFF_ORPHAN_AFTER_SECONDS": "90",
    "SIGNOFF_MAX_RECOVERY_ATTEMPTS": "2",
    "SIGNOFF_RETENTION_DAYS": "30",
    "SIGNOFF_EXPIRY_INTERVAL_SECONDS": "30",
    "SIGNOFF_REAPER_INTERVAL_SECONDS": "60",
    "SIGNOFF_OUTBOX_INTERVAL_SECONDS": "2",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting leaks in from the developer's shell (nor Bolt's OAuth switches)."""
    for env, _default, _description in config.settings_rows():
        monkeypatch.delenv(env, raising=False)
    for env in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET"):
        monkeypatch.delenv(env, raising=False)


def test_settings__defaults_match_the_external_contract() -> None:
    settings = config.load_settings()

    defaults = {env: default for env, default, _ in config.settings_rows()}
    assert {env: defaults[env] for env in CONTRACT_DEFAULTS} == CONTRACT_DEFAULTS
    assert settings.database_url == "sqlite+aiosqlite:///./signoff.db"
    assert settings.port == 3000
    assert settings.host == "0.0.0.0"
    assert settings.approvals_channel is None
    assert settings.suspension_ttl == timedelta(minutes=30)
    assert settings.orphan_after == timedelta(seconds=90)
    assert settings.retention == timedelta(days=30)
    assert settings.outbox_max_attempts == 8
    assert settings.purge_interval_hours == 24


def test_settings__durations_accept_decimals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_SUSPENSION_TTL_MINUTES", "0.05")
    monkeypatch.setenv("SIGNOFF_ORPHAN_AFTER_SECONDS", "1.5")
    monkeypatch.setenv("SIGNOFF_OUTBOX_INTERVAL_SECONDS", "0.25")
    monkeypatch.setenv("SIGNOFF_RETENTION_DAYS", "0.5")

    settings = config.load_settings()

    assert settings.suspension_ttl == timedelta(seconds=3)
    assert settings.orphan_after == timedelta(seconds=1.5)
    assert settings.outbox_interval_seconds == 0.25
    assert settings.retention == timedelta(hours=12)


def test_settings__reads_each_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9999/api")
    monkeypatch.setenv("DATABASE_URL", "postgres://signoff@db:5432/signoff")
    monkeypatch.setenv("PORT", "8080")
    monkeypatch.setenv("SIGNOFF_HOST", "127.0.0.1")
    monkeypatch.setenv("SIGNOFF_APP", "examples.purchase:app")
    monkeypatch.setenv("SIGNOFF_APPROVALS_CHANNEL", "C0APPROVALS")
    monkeypatch.setenv("SIGNOFF_MAX_RECOVERY_ATTEMPTS", "5")
    monkeypatch.setenv("SIGNOFF_OUTBOX_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("SIGNOFF_MODEL_NAME", "small-model")

    settings = config.load_settings()

    # The SDK appends method names to the base URL, so it gains its trailing slash.
    assert settings.slack_api_url == "http://127.0.0.1:9999/api/"
    assert settings.database_url == "postgresql+asyncpg://signoff@db:5432/signoff"
    assert (settings.port, settings.host) == (8080, "127.0.0.1")
    assert settings.app == "examples.purchase:app"
    assert settings.approvals_channel == "C0APPROVALS"
    assert (settings.max_recovery_attempts, settings.outbox_max_attempts) == (5, 3)
    assert settings.model_name == "small-model"


def test_settings__empty_approvals_channel_means_dm_the_requester(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_APPROVALS_CHANNEL", "")

    assert config.load_settings().approvals_channel is None


def test_load_settings__overrides_by_field_or_variable_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PORT", "8080")

    assert config.load_settings(port=4000).port == 4000
    assert config.load_settings(PORT=4001).port == 4001


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("SIGNOFF_SUSPENSION_TTL_MINUTES", "0"),
        ("SIGNOFF_ORPHAN_AFTER_SECONDS", "-1"),
        ("SIGNOFF_OUTBOX_INTERVAL_SECONDS", "nan"),
        ("SIGNOFF_MAX_RECOVERY_ATTEMPTS", "0"),
        ("SIGNOFF_OUTBOX_MAX_ATTEMPTS", "0"),
        ("PORT", "70000"),
        ("SIGNOFF_APP", "examples.quotes"),
        ("SLACK_API_URL", "slack.com/api"),
    ],
)
def test_load_settings__out_of_bounds_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)

    with pytest.raises(config.ConfigError, match=env):
        config.load_settings()


def test_load_settings__unsupported_database_never_echoes_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://signoff:hunter2@db/signoff")

    with pytest.raises(config.ConfigError, match="DATABASE_URL") as raised:
        config.load_settings()

    assert "mysql" in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_require_slack__missing_token_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "8f742231b10e8888abcd99yyyzzz85a5")

    with pytest.raises(config.ConfigError) as raised:
        config.load_settings().require_slack()

    assert "SLACK_BOT_TOKEN" in str(raised.value)
    assert "SLACK_SIGNING_SECRET" not in str(raised.value)


def test_require_slack__empty_values_count_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "   ")

    with pytest.raises(config.ConfigError) as raised:
        config.load_settings().require_slack()

    assert "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET are not set" in str(raised.value)


def test_require_slack__returns_the_credentials_and_repr_hides_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret-token")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "8f742231b10e8888abcd99yyyzzz85a5")
    settings = config.load_settings()

    credentials = settings.require_slack()

    assert credentials == ("xoxb-secret-token", "8f742231b10e8888abcd99yyyzzz85a5")
    assert "xoxb-secret-token" not in repr(settings)
    assert "8f742231" not in repr(settings)


def test_settings_help__lists_every_variable_with_its_default() -> None:
    help_text = config.settings_help()
    lines = help_text.splitlines()

    for env, default, description in config.settings_rows():
        row = next((line for line in lines if line.split()[:1] == [env]), None)
        assert row is not None, f"{env} missing from settings_help()"
        assert row.split()[1] == default
        assert description
    for env in CONTRACT_DEFAULTS:
        assert env in help_text
    assert max(len(line) for line in lines) <= 100


def test_readme__configuration_table_lists_every_variable() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table_rows = {
        line.split("|")[1].strip().strip("`")
        for line in readme.splitlines()
        if line.startswith("| `")
    }

    missing = {env for env, _, _ in config.settings_rows()} - table_rows
    assert not missing, f"README's configuration table lacks {sorted(missing)}"


def test_readme__configuration_table_shows_each_default_as_settings_help_does() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = {
        cells[1].strip().strip("`"): cells[2].strip().strip("`")
        for line in readme.splitlines()
        if line.startswith("| `") and len(cells := line.split("|")) > 3
    }

    for env, default, _description in config.settings_rows():
        assert shown.get(env) == default, f"README shows {env} default {shown.get(env)!r}"


def test_settings__model_name_defaults_to_what_the_examples_ask_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert config.load_settings().model_name == config.DEFAULT_MODEL_NAME == "gpt-4o-mini"
    monkeypatch.setenv("SIGNOFF_MODEL_NAME", "   ")
    assert config.load_settings().model_name == "gpt-4o-mini"
    assert dict((env, d) for env, d, _ in config.settings_rows())["SIGNOFF_MODEL_NAME"] == (
        "gpt-4o-mini")


def test_settings__app_token_turns_on_socket_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load_settings().socket_mode is False
    monkeypatch.setenv("SLACK_APP_TOKEN", "  xapp-1-A0-2-secretvalue ")

    settings = config.load_settings()

    assert settings.socket_mode is True
    assert settings.app_token() == "xapp-1-A0-2-secretvalue"
    assert "secretvalue" not in repr(settings)


def test_settings__a_bot_token_given_as_the_app_token_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xoxb-1-this-is-the-bot-token")

    with pytest.raises(config.ConfigError, match="SLACK_APP_TOKEN") as raised:
        config.load_settings()

    assert "xapp-" in str(raised.value)
    assert "this-is-the-bot-token" not in str(raised.value)


@pytest.mark.parametrize(("value", "expected"), [("json", "json"), ("text", "text")])
def test_settings__log_format(monkeypatch: pytest.MonkeyPatch, value: str, expected: str) -> None:
    monkeypatch.setenv("SIGNOFF_LOG_FORMAT", value)

    assert config.load_settings().log_format == expected


def test_settings__unknown_log_format_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_LOG_FORMAT", "xml")

    with pytest.raises(config.ConfigError, match="SIGNOFF_LOG_FORMAT"):
        config.load_settings()


def test_settings__secret_values_are_every_secret_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret-token")
    monkeypatch.setenv("SIGNOFF_METRICS_TOKEN", "metrics-token-1")
    monkeypatch.setenv("DATABASE_URL", "postgres://signoff:hunter2hunter2@db/signoff")

    assert sorted(config.load_settings().secret_values()) == [
        "hunter2hunter2", "metrics-token-1", "xoxb-secret-token"]
