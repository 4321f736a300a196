"""Every text a person reads in Slack: the cards and notices the outbox posts
(Block Kit), the replies to clicks and `/signoff` (``replies``), and the decline
form (``decline_form``)."""

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
