"""How a replaced approval card says what became of its request.

One function per `CardStatus`; each returns the short header word and the
status line shown where the buttons were.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.cards import mrkdwn
from resume.outbox import CardStatus, CardUpdate

#: A reason (decline, guard, failure) is a person's or a check's sentence, not a document.
REASON_MAX = 500

_Line = Callable[[CardUpdate], str]


def headline(status: CardStatus) -> str:
    """The header's last words once the card is settled: `send_quote — approved`."""
    return _HEADLINES[status]


def line(update: CardUpdate) -> str:
    """The status line, in mrkdwn: `✅ Approved by <@U1> at <date>`."""
    return _LINES[update.status](update)


def _reason(update: CardUpdate) -> str:
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(update.reason or "")), REASON_MAX)


def _by(update: CardUpdate) -> str:
    return f" by {mrkdwn.mention(update.actor)}" if update.actor else ""


def _approved(update: CardUpdate) -> str:
    return f":white_check_mark: Approved{_by(update)} at {mrkdwn.date(update.at)}"


def _declined(update: CardUpdate) -> str:
    reason = _reason(update)
    return f":x: Declined{_by(update)}" + (f": {reason}" if reason else "")


def _expired(update: CardUpdate) -> str:
    return f":hourglass: Expired at {mrkdwn.date(update.at)} — ask again"


def _superseded(update: CardUpdate) -> str:
    return (
        ":arrows_counterclockwise: Details changed while waiting"
        " — see the new request in the thread"
    )


def _cancelled(update: CardUpdate) -> str:
    reason = _reason(update)
    return f":no_entry_sign: Cancelled{_by(update)}" + (f": {reason}" if reason else "")


def _guard_failed(update: CardUpdate) -> str:
    return f":no_entry: Blocked by a check: {_reason(update) or 'the tool refused to run'}"


def _no_longer_permitted(update: CardUpdate) -> str:
    return ":lock: Permissions changed — please ask again"


def _failed(update: CardUpdate) -> str:
    return f":warning: {_reason(update) or 'The run failed'}"


_LINES: dict[CardStatus, _Line] = {
    "approved": _approved,
    "declined": _declined,
    "expired": _expired,
    "superseded": _superseded,
    "cancelled": _cancelled,
    "guard_failed": _guard_failed,
    "no_longer_permitted": _no_longer_permitted,
    "failed": _failed,
}

_HEADLINES: dict[CardStatus, str] = {
    "approved": "approved",
    "declined": "declined",
    "expired": "expired",
    "superseded": "details changed",
    "cancelled": "cancelled",
    "guard_failed": "blocked by a check",
    "no_longer_permitted": "permissions changed",
    "failed": "failed",
}
