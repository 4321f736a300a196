"""Log output for `signoff serve` and `signoff sandbox`: readable lines or JSON lines.

``SIGNOFF_LOG_FORMAT=json`` writes one JSON object per record (python-json-logger):
``timestamp``, ``level``, ``logger``, ``message``, and whatever the call site put
in ``extra`` (``run_id``, ``action``, ``user``, ...). Either way a redaction
filter runs first: the configured secrets, and anything shaped like a Slack
token, become ``[redacted]`` in the message, its arguments, the extras and
the traceback, so a log shipped elsewhere never carries a credential.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from typing import Any, Literal

from pythonjsonlogger.json import JsonFormatter

__all__ = ["REDACTED", "RedactSecrets", "configure"]

REDACTED = "[redacted]"
#: Slack's token shapes: bot, user, app-level, refresh, config tokens.
_SLACK_TOKEN = re.compile(r"\bx(?:ox[abposer]|app)-[A-Za-z0-9-]+")
#: Socket Mode URLs carry a one-use ticket.
_TICKET = re.compile(r"(ticket=)[^&\s\"']+")
#: A secret shorter than this is not searched for (it would redact ordinary words).
_MIN_SECRET = 8
#: LogRecord attributes that are not ours to rewrite.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message"}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
JSON_FIELDS = "%(levelname)s %(name)s %(message)s"


class RedactSecrets(logging.Filter):
    """Replaces each secret, and Slack token shapes, in a record before it is formatted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len,
                               reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        text = _TICKET.sub(r"\1" + REDACTED, text)
        return _SLACK_TOKEN.sub(REDACTED, text)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self._value(v) for v in value)
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        # The message is rendered now, so an argument's repr cannot slip a secret through.
        record.msg, record.args = self.redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
            record.exc_info = None
        for key, value in vars(record).items():
            if key not in _STANDARD:
                setattr(record, key, self._value(value))
        return True


def formatter(fmt: Literal["text", "json"]) -> logging.Formatter:
    if fmt == "json":
        # timestamp=True: ISO 8601 in UTC, as log shippers expect.
        return JsonFormatter(JSON_FIELDS, rename_fields={"levelname": "level", "name": "logger"},
                             timestamp=True, json_ensure_ascii=False)
    return logging.Formatter(TEXT_FORMAT)


def configure(fmt: Literal["text", "json"], *, level: int = logging.INFO,
              secrets: Iterable[str] = (), stream: Any = None) -> logging.Handler:
    """Send the root logger's records to ``stream`` (stderr) in ``fmt``, secrets redacted.

    Replaces any handler set before (a second call, or ``logging.basicConfig``).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(RedactSecrets(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # One line per job run every two seconds drowns everything else out.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return handler
