"""The approval card: a pending request, its preview, and Approve / Decline.

`approval_card` is posted when a run suspends; `resolved_card` replaces it
(same content, buttons gone, a status line instead) once the request is
settled. Both are pure: the outbox job sends what they return.
"""

from __future__ import annotations

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    DividerBlock,
    HeaderBlock,
    PlainTextObject,
)

from bot import ids
from bot.cards import message, mrkdwn, preview, status
from resume.outbox import ApprovalCard, BudgetData, CardUpdate, FieldChange

#: The question as asked; longer ones are clipped (the run keeps it whole).
QUESTION_MAX = 1000
#: Diff lines shown; the rest are counted.
DIFF_LINES_MAX = 10
#: Each side of a diff line.
DIFF_NAME_MAX = 60
DIFF_VALUE_MAX = 80
#: Approvers mentioned by name.
APPROVERS_MAX = 10


def approval_card(card: ApprovalCard) -> message.Message:
    """The card posted for a pending request: details, budget, expiry, buttons."""
    blocks = [
        _header(card, f"{card.tool} needs approval", part="card"),
        *_details(card, part="card"),
        message.context(_expiry_line(card), block=message.block_id(card.token, "card.expiry")),
        _actions(card),
    ]
    again = " again — details changed" if card.diff else ""
    fallback = (
        f"{mrkdwn.escape(card.tool)} needs approval{again}: "
        f"{mrkdwn.mention(card.requester)} asked {mrkdwn.escape(card.question)}"
    )
    return message.finish(fallback, blocks)


def resolved_card(card: ApprovalCard, update: CardUpdate) -> message.Message:
    """The same card once settled: no buttons, and a line saying what happened."""
    line = status.line(update)
    blocks = [
        _header(card, f"{card.tool} — {status.headline(update.status)}", part="done"),
        message.section(line, block=message.block_id(card.token, "done.status")),
        *_details(card, part="done"),
    ]
    if approvers := _approvers_line(card):
        blocks.append(message.context(approvers, block=message.block_id(card.token, "done.who")))
    return message.finish(f"{mrkdwn.escape(card.tool)}: {line}", blocks)


def _header(card: ApprovalCard, text: str, *, part: str) -> HeaderBlock:
    return HeaderBlock(
        block_id=message.block_id(card.token, f"{part}.header"),
        text=PlainTextObject(text=mrkdwn.clip(mrkdwn.plain(text), message.HEADER_MAX), emoji=True),
    )


def _details(card: ApprovalCard, *, part: str) -> list[Block]:
    """Everything the approver judges by, shared by the open and the settled card."""
    blocks: list[Block] = [
        message.section(_request_text(card), block=message.block_id(card.token, f"{part}.request"))
    ]
    if card.diff:
        blocks.append(
            message.section(
                diff_text(card.diff, run_id=card.run_id),
                block=message.block_id(card.token, f"{part}.diff"),
            )
        )
    blocks.append(DividerBlock(block_id=message.block_id(card.token, f"{part}.rule.0")))
    blocks.extend(preview.blocks(card.preview, run_id=card.run_id, token=card.token, part=part))
    blocks.append(DividerBlock(block_id=message.block_id(card.token, f"{part}.rule.1")))
    blocks.append(
        message.context(
            budget_line(card.budget), block=message.block_id(card.token, f"{part}.budget")
        )
    )
    return blocks


def _request_text(card: ApprovalCard) -> str:
    question = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(card.question)), QUESTION_MAX)
    tool = f"*Tool:* {mrkdwn.code(card.tool)}"
    if card.dangerous:
        tool += "  :warning: marked dangerous"
    return f"{mrkdwn.mention(card.requester)} asked:\n>{question or '(no question)'}\n{tool}"


def diff_text(diff: list[FieldChange], *, run_id: str) -> str:
    """`*Details changed while waiting*` then one `• field: old → new` line per change."""
    lines = ["*Details changed while waiting*"]
    lines += [_change(change) for change in diff[:DIFF_LINES_MAX]]
    if (rest := len(diff) - DIFF_LINES_MAX) > 0:
        lines.append(f"… and {rest} more — {mrkdwn.code(f'signoff runs show {run_id}')}")
    return "\n".join(lines)


def _change(change: FieldChange) -> str:
    def side(value: str | None) -> str:
        if value is None:
            return "_(none)_"
        return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(value)), DIFF_VALUE_MAX) or "_(empty)_"

    name = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(change.field)), DIFF_NAME_MAX)
    return f"• *{name}*: {side(change.old)} → {side(change.new)}"


def budget_line(budget: BudgetData) -> str:
    """`Budget used: steps 3/10 · spend $0.12/$1.00 · tool calls 2/20 · time 1m 05s/10m 00s`."""
    return " · ".join(
        [
            f"Budget used: steps {budget.steps}/{budget.max_steps}",
            f"spend {mrkdwn.money(budget.spend_usd)}/{mrkdwn.money(budget.max_spend_usd)}",
            f"tool calls {budget.tool_calls}/{budget.max_tool_calls}",
            f"time {mrkdwn.duration(budget.elapsed_ms)}/{mrkdwn.duration(budget.max_elapsed_ms)}",
        ]
    )


def _expiry_line(card: ApprovalCard) -> str:
    expires = ":hourglass_flowing_sand: " + mrkdwn.date(
        card.expires_at, "expires {date_short_pretty} at {time}"
    )
    approvers = _approvers_line(card)
    return f"{expires} · {approvers}" if approvers else expires


def _approvers_line(card: ApprovalCard) -> str:
    """`Approvers: <@A>, <@B>` — only when someone other than the requester decides."""
    if card.approvers_policy:
        return f"Approvers: {mrkdwn.escape(card.approvers_policy)}"
    if not card.approvers or card.approvers == [card.requester]:
        return ""
    return f"Approvers: {mrkdwn.mentions(card.approvers, most=APPROVERS_MAX)}"


def _actions(card: ApprovalCard) -> ActionsBlock:
    approve = ButtonElement(
        text=PlainTextObject(text="Approve", emoji=True),
        action_id=ids.APPROVE_ACTION,
        value=card.token,
        style="primary",
        confirm=_confirm(card) if card.dangerous else None,
    )
    decline = ButtonElement(
        text=PlainTextObject(text="Decline", emoji=True),
        action_id=ids.DECLINE_ACTION,
        value=card.token,
        style="danger",
    )
    return ActionsBlock(block_id=ids.ACTIONS_BLOCK, elements=[approve, decline])


def _confirm(card: ApprovalCard) -> ConfirmObject:
    """The dialog a dangerous tool's Approve opens before anything is sent."""
    tool = mrkdwn.clip(mrkdwn.plain(card.tool), 80)
    text = (
        f"{mrkdwn.code(card.tool)} is marked dangerous. Approving runs it now for "
        f"{mrkdwn.mention(card.requester)}, with the details on this card."
    )
    return ConfirmObject(
        title=PlainTextObject(text=mrkdwn.clip(f"Approve {tool}?", 100)),
        text=mrkdwn.clip(text, 300),
        confirm=PlainTextObject(text="Approve"),
        deny=PlainTextObject(text="Cancel"),
        style="danger",
    )
