"""A Slack message as signoff sends it, and the limits every card is built to.

Blocks are built with `slack_sdk.models.blocks` and turned into dicts with
`to_dict()`, which raises `SlackObjectFormationError` on a limit the models
know (section text, header, button text, block ids...). What the models do not
check (the block count, the length of each section field, the combined text)
the builders respect by construction; `finish` refuses a message that does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.cards import mrkdwn

#: What a card function returns: the notification fallback text and the block dicts.
Message = tuple[str, list[dict[str, Any]]]

#: Slack's cap on blocks in one message (not checked by slack_sdk).
MAX_BLOCKS = 50
#: A section's text, and any mrkdwn text object.
SECTION_TEXT_MAX = 3000
#: One section field (not checked by slack_sdk).
FIELD_MAX = 2000
#: Fields in one section.
FIELDS_PER_SECTION = 10
#: A header block's plain text.
HEADER_MAX = 150
#: Slack answers `msg_blocks_too_long` somewhere above ~13k characters of block
#: text; every card stays under this, with room to spare.
TEXT_BUDGET = 12_000
#: The top-level `text`: shown in notifications, so short is better anyway.
FALLBACK_MAX = 300
#: A block_id's length.
BLOCK_ID_MAX = 255


class CardTooLarge(ValueError):
    """A card came out larger than Slack accepts; the builder that made it is wrong."""


def block_id(token: str, part: str) -> str:
    """`signoff.<part>.<token>`: unique within a message, new whenever the token or part is.

    A replaced card uses different parts (`done.` prefix) than the card it
    replaces, so Slack clients never carry state over between the two.
    """
    return mrkdwn.identifier(f"signoff.{part}.{token}")[:BLOCK_ID_MAX]


def section(text: str, *, block: str) -> SectionBlock:
    """A mrkdwn section, clipped to Slack's section limit."""
    return SectionBlock(
        block_id=block,
        text=markdown(mrkdwn.clip(text, SECTION_TEXT_MAX)),
    )


def context(text: str, *, block: str) -> ContextBlock:
    """A one-element mrkdwn context line (small grey text), clipped like a section."""
    return ContextBlock(
        block_id=block,
        elements=[markdown(mrkdwn.clip(text, SECTION_TEXT_MAX))],
    )


def markdown(text: str) -> MarkdownTextObject:
    """A mrkdwn object Slack takes as written: no URL, channel or mention is guessed at.

    Only the explicit `<@U…>` / `<!date…>` sequences signoff writes itself are parsed.
    """
    return MarkdownTextObject(text=text, verbatim=True)


def finish(fallback: str, blocks: Iterable[Block]) -> Message:
    """Validate and serialise: `(fallback text, block dicts)`.

    `fallback` is mrkdwn, like the blocks: escape what a person typed in it.

    Raises `SlackObjectFormationError` (from slack_sdk) or `CardTooLarge`.
    """
    dicts = [block.to_dict() for block in blocks]
    if len(dicts) > MAX_BLOCKS:
        raise CardTooLarge(f"{len(dicts)} blocks; Slack accepts {MAX_BLOCKS}")
    size = sum(mrkdwn.slack_len(text) for text in texts(dicts))
    if size > TEXT_BUDGET:
        raise CardTooLarge(f"{size} characters of block text; the budget is {TEXT_BUDGET}")
    for field in _fields(dicts):
        if mrkdwn.slack_len(field) > FIELD_MAX:
            raise CardTooLarge(
                f"a section field of {len(field)} characters; Slack accepts {FIELD_MAX}"
            )
    return mrkdwn.clip(mrkdwn.one_line(mrkdwn.sendable(fallback)), FALLBACK_MAX), dicts


def texts(
    blocks: list[dict[str, Any]], kinds: tuple[str, ...] = ("mrkdwn", "plain_text")
) -> list[str]:
    """Every text of the given `kinds` a person would read in `blocks`, in order."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") in kinds and isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(blocks)
    return found


def _fields(blocks: list[dict[str, Any]]) -> list[str]:
    return [
        field["text"]
        for block in blocks
        if block.get("type") == "section"
        for field in block.get("fields", [])
    ]
