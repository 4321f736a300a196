"""Log lines as `signoff serve` writes them: JSON objects or text, secrets redacted either way."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Literal

import pytest

from bot import config, logs

BOT_TOKEN = "xoxb-1234-5678-abcdefghijkl"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    kept, level = list(root.handlers), root.level
    out = io.StringIO()
    try:
        yield out
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept:
            root.addHandler(handler)
        root.setLevel(level)


def _settings() -> config.Settings:
    return config.load_settings(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_APP_TOKEN="xapp-1-A1-2-appsecret", SIGNOFF_METRICS_TOKEN="scrape-secret-1",
        DATABASE_URL="postgresql://signoff:db-password-9@db/signoff")


def test_json_logs__one_object_per_line_with_the_extras(stream: io.StringIO) -> None:
    logs.configure("json", stream=stream)

    logging.getLogger("bot.test").info("run %s claimed", "run_1", extra={
        "run_id": "run_1", "action": "click_won", "user": "U0REP"})

    [record] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert record["message"] == "run run_1 claimed"
    assert (record["level"], record["logger"]) == ("INFO", "bot.test")
    assert (record["run_id"], record["action"], record["user"]) == ("run_1", "click_won", "U0REP")
    assert record["timestamp"].endswith("+00:00")


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_logs__every_configured_secret_is_redacted_wherever_it_appears(
    stream: io.StringIO, fmt: Literal["json", "text"],
) -> None:
    settings = _settings()
    logs.configure(fmt, secrets=settings.secret_values(), stream=stream)
    log = logging.getLogger("bot.test")

    log.warning("token %s secret %s", BOT_TOKEN, SIGNING_SECRET,
                extra={"headers": {"Authorization": "Bearer xapp-1-A1-2-appsecret"},
                       "url": "wss://wss.slack.invalid/link/?ticket=abc123&app_id=A1"})
    try:
        raise RuntimeError("connect failed for postgresql://signoff:db-password-9@db")
    except RuntimeError:
        log.exception("scrape-secret-1 was refused")

    out = stream.getvalue()
    for secret in ("xoxb-1234", SIGNING_SECRET, "appsecret", "scrape-secret-1",
                   "db-password-9", "abc123"):
        assert secret not in out
    assert f"token {logs.REDACTED} secret {logs.REDACTED}" in out
    assert "connect failed" in out  # the traceback itself is kept
