"""The preview part of an approval card, truncated to fit Slack whatever its size.

A preview is written by the app's tool, so it can be anything: hundreds of
fields, megabyte values, emoji, text that looks like a mention. It is shown
escaped, field by field in the order given, until a character budget is
spent; whatever did not fit is named in a visible note pointing at the CLI,
where the full preview is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.models.blocks import Block, MarkdownTextObject, SectionBlock

from bot.cards import message, mrkdwn
from resume.outbox import PreviewData

#: The preview's title line.
TITLE_MAX = 200
#: A field's label.
LABEL_MAX = 100
#: A field's value: long enough for an address or a line item, short enough
#: that one value cannot crowd out every other field.
VALUE_MAX = 1000
#: All fields together (labels, values, markup).
FIELDS_BUDGET = 4500
#: Fields and body together: the body gets what the fields leave, up to a section.
PREVIEW_BUDGET = 6500
#: The body's own cap: one section, with room for nothing else.
BODY_MAX = 2900
#: Sections of fields (ten each); the rest of the card needs the remaining blocks.
MAX_FIELD_SECTIONS = 4


@dataclass(frozen=True)
class Cut:
    """What the card left out of a preview."""

    shown: int
    total: int
    values_shortened: bool = False
    body_shortened: bool = False

    @property
    def happened(self) -> bool:
        return self.shown < self.total or self.values_shortened or self.body_shortened


def blocks(preview: PreviewData, *, run_id: str, token: str, part: str) -> list[Block]:
    """Title with the first fields, more field sections, the body, and the note if cut.

    `part` prefixes every block_id (`card`, `done`), so a replaced card gets new ids.
    """
    fields, values_shortened, used = _fit_fields(preview.fields)
    title = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(preview.title)), TITLE_MAX) or "Preview"
    out: list[Block] = []
    for index, start in enumerate(range(0, max(len(fields), 1), message.FIELDS_PER_SECTION)):
        chunk = fields[start : start + message.FIELDS_PER_SECTION]
        out.append(
            SectionBlock(
                block_id=message.block_id(token, f"{part}.preview.{index}"),
                text=MarkdownTextObject(text=f"*{title}*") if index == 0 else None,
                fields=[MarkdownTextObject(text=field) for field in chunk] or None,
            )
        )
    body, body_shortened = _fit_body(preview.body, room=PREVIEW_BUDGET - used)
    if body:
        out.append(message.section(body, block=message.block_id(token, f"{part}.body")))
    cut = Cut(len(fields), len(preview.fields), values_shortened, body_shortened)
    if cut.happened:
        out.append(
            message.context(
                truncation_note(cut, run_id), block=message.block_id(token, f"{part}.cut")
            )
        )
    return out


def truncation_note(cut: Cut, run_id: str) -> str:
    """`Preview truncated: 12 of 300 fields shown, body shortened — full details in ...`."""
    parts = []
    if cut.shown < cut.total:
        parts.append(f"{cut.shown} of {cut.total} fields shown")
    if cut.values_shortened:
        parts.append("long values shortened")
    if cut.body_shortened:
        parts.append("body shortened")
    where = mrkdwn.code(f"signoff runs show {run_id}")
    return f":scissors: Preview truncated: {', '.join(parts)} — full details in {where}"


def field(label: str, value: str) -> tuple[str, bool]:
    """`*label*: value`, escaped and clipped; and whether the value was shortened."""
    name = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(label)), LABEL_MAX)
    full = mrkdwn.escape(value).strip()
    shown = mrkdwn.clip(full, VALUE_MAX)
    if not name:
        return shown or "—", shown != full
    return f"*{name}*: {shown or '—'}", shown != full


def _fit_fields(pairs: list[tuple[str, str]]) -> tuple[list[str], bool, int]:
    """The leading fields that fit, whether any value was shortened, and the size used."""
    fitted: list[str] = []
    shortened = False
    used = 0
    for label, value in pairs[: MAX_FIELD_SECTIONS * message.FIELDS_PER_SECTION]:
        text, clipped = field(label, value)
        if used + mrkdwn.slack_len(text) > FIELDS_BUDGET:
            break
        fitted.append(text)
        shortened = shortened or clipped
        used += mrkdwn.slack_len(text)
    return fitted, shortened, used


def _fit_body(body: str | None, *, room: int) -> tuple[str, bool]:
    full = mrkdwn.escape(body or "").strip()
    shown = mrkdwn.clip(full, min(BODY_MAX, room))
    return shown, shown != full
