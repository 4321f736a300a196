"""Block Kit rendering of signoff's outbox payloads: every message a person reads."""

from bot.cards.approval import approval_card, resolved_card
from bot.cards.help import help_text
from bot.cards.message import CardTooLarge, Message
from bot.cards.notices import run_notice

__all__ = [
    "CardTooLarge",
    "Message",
    "approval_card",
    "help_text",
    "resolved_card",
    "run_notice",
]
