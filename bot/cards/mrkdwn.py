"""Slack mrkdwn primitives: escaping, safe clipping, mentions, dates, numbers.

Everything a person, a tool or a model wrote (a question, a preview value, a
decline reason, an answer) goes through `escape` before it is placed in
mrkdwn, so it can never become a mention, a link, bold text, an emoji or a
quote, and can never look like signoff's own words. Lengths are measured the way the strictest
reader would: in UTF-16 code units, so an emoji counts twice and a clipped
text stays within Slack's limits whether Slack counts code points or units.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

#: Appended to anything clipped, so a reader knows there was more.
ELLIPSIS = "…"

# C0 controls other than tab and newline, and DEL: invisible, and some are refused by Slack.
# Bidi overrides/isolates/marks and zero-width characters: they reorder or hide what a
# reader sees, so a value could show text other than what it holds.
_CONTROLS = dict.fromkeys([
    *range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F,
    *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C,
    0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF,
])
# mrkdwn has no backslash escape: its control characters become look-alikes that
# format nothing (`*bold*`, `_italic_`, `~strike~`, `code`).
_INERT = str.maketrans({"*": "\u2217", "~": "\u223c", "`": "\u02cb"})
# Slack opens italics only at a word's edge: `refund_order` and `run_1a2b` stay as they are
# (copyable ids); an underscore with a non-word character on either side becomes a look-alike.
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_UNDERSCORE_STAND_IN = "\u02cd"
# A colon that opens an `:emoji:` code or a `scheme://` link; other colons read as they are.
_CODE_COLON = re.compile(r":(?=//|[^\s:]+:)")
_COLON_STAND_IN = "\ua789"
# A quote marker (already an entity) at the start of a line.
_LINE_QUOTE = re.compile(r"(?m)^([ \t]*)&gt;")
_QUOTE_STAND_IN = "\uff1e"
# Looks like a backtick but cannot end an inline code span.
_BACKTICK_STAND_IN = "\u02cb"
# Characters a block_id is built from; anything else becomes `_`.
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
# A user or bot id as Slack issues them; anything else is shown as plain text.
_USER_ID = re.compile(r"[UWB][A-Z0-9]{1,40}")
# An HTML entity left open at the end of a clipped text (`&am`, `&lt`).
_OPEN_ENTITY = re.compile(r"&[a-z]{0,4}$")


def slack_len(text: str) -> int:
    """Length in UTF-16 code units: never less than Slack's count, however it counts."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def escape(text: str) -> str:
    """Make text from a person, a tool or a model inert in mrkdwn.

    `&`, `<`, `>` become entities; `*`, `~`, backtick, an underscore at a
    word's edge, and a colon that would open an emoji code or a link, become
    look-alikes that format nothing; a `>` starting a line cannot open a quote. The result is also
    `sendable` (no bidi or zero-width controls).
    """
    inert = _EDGE_UNDERSCORE.sub(_UNDERSCORE_STAND_IN, entities(text).translate(_INERT))
    inert = _CODE_COLON.sub(_COLON_STAND_IN, inert)
    return _LINE_QUOTE.sub(lambda m: m.group(1) + _QUOTE_STAND_IN, inert)


def entities(text: str) -> str:
    """`&`, `<`, `>` as entities, so `text` cannot become a mention or a link; also `sendable`."""
    return sendable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoted(text: str) -> str:
    """Escaped multi-line data as a block quote: every line of it sits behind the quote bar."""
    return "\n".join(f">{line}" for line in escape(text).strip().splitlines())


def plain(text: str) -> str:
    """User-provided text for a `plain_text` object: one line, sendable, not entity-escaped."""
    return one_line(sendable(text))


def sendable(text: str) -> str:
    """`text` as UTF-8 JSON can carry it: lone surrogates become `?`, stray controls go."""
    return text.encode("utf-8", "replace").decode("utf-8").translate(_CONTROLS)


def clip(text: str, limit: int) -> str:
    """`text` if it fits in `limit`, else a prefix ending in `ELLIPSIS` that fits.

    The cut never lands inside a `<...>` control sequence (a mention, link or
    date) or an `&...;` entity, so a clipped text renders as what it was,
    only shorter.
    """
    if slack_len(text) <= limit:
        return text
    cut = _prefix(text, max(limit - slack_len(ELLIPSIS), 0))
    opened = cut.rfind("<")
    if opened > cut.rfind(">"):
        cut = cut[:opened]
    cut = _OPEN_ENTITY.sub("", cut)
    return cut.rstrip() + ELLIPSIS


def _prefix(text: str, room: int) -> str:
    """The longest prefix of `text` that is at most `room` units long."""
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > room:
            return text[:index]
    return text


def identifier(text: str) -> str:
    """`text` reduced to characters safe in a block_id."""
    return _ID_UNSAFE.sub("_", text)


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space."""
    return " ".join(text.split())


def mention(user_id: str) -> str:
    """`<@U123>` for a Slack user id; anything that is not one is shown inert."""
    if _USER_ID.fullmatch(user_id):
        return f"<@{user_id}>"
    return escape(one_line(user_id))


def mentions(user_ids: list[str], *, most: int = 10) -> str:
    """`<@A>, <@B> and 3 others`: at most `most` mentions, so the line stays short."""
    shown = ", ".join(mention(user) for user in user_ids[:most])
    rest = len(user_ids) - most
    return f"{shown} and {rest} others" if rest > 0 else shown


def code(text: str) -> str:
    """Inline code for an identifier (a tool, a run id, a reason code)."""
    return f"`{in_code(text)}`"


def in_code(text: str) -> str:
    """`text` made safe to sit between backticks: escaped, one line, no backtick to close early."""
    return entities(one_line(text)).replace("`", _BACKTICK_STAND_IN)


def date(epoch: float, template: str = "{date_short_pretty} at {time}") -> str:
    """A Slack date token: each reader sees `template` in their own time zone.

    `template` is literal text with Slack's `{date_*}` / `{time}` tokens. The
    fallback (shown where Slack cannot localise) is the same moment in UTC.
    """
    if not math.isfinite(epoch):
        return "at an unknown time"
    try:
        moment = datetime.fromtimestamp(epoch, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return "at an unknown time"
    words = template.replace("{date_short_pretty}", "{date}").replace("{time}", "{clock}")
    fallback = words.format(date=f"{moment:%Y-%m-%d}", clock=f"{moment:%H:%M} UTC")
    return f"<!date^{int(epoch)}^{template}|{fallback}>"


def money(usd: float) -> str:
    """`$1.50`; sub-cent amounts get four decimals (`$0.0042`) so they do not read as zero."""
    if usd == 0 or abs(usd) >= 0.01 or not math.isfinite(usd):
        return f"${usd:,.2f}"
    return f"${usd:.4f}"


def duration(ms: int) -> str:
    """`45s`, `2m 05s`, `1h 02m`: the two largest units are enough to judge a budget."""
    seconds = max(ms, 0) // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"
