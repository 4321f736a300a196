"""The decline form: the modal the Decline button opens, asking for an optional reason."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement, PlainTextObject
from slack_sdk.models.views import View

from bot import ids

#: Longest reason accepted; the model and the card both get it whole.
REASON_MAX = 500


def reason_view(token: str) -> dict[str, Any]:
    """The modal for ``token`` (carried in ``private_metadata``), validated by slack_sdk."""
    view = View(
        type="modal",
        callback_id=ids.DECLINE_REASON_CALLBACK,
        private_metadata=token,
        title=PlainTextObject(text="Decline request"),
        submit=PlainTextObject(text="Decline"),
        close=PlainTextObject(text="Cancel"),
        blocks=[
            InputBlock(
                block_id=ids.DECLINE_REASON_BLOCK,
                optional=True,
                label=PlainTextObject(text="Reason"),  # Slack adds "(optional)" itself
                hint=PlainTextObject(text="The agent reads this and carries on without the "
                                          "declined action."),
                element=PlainTextInputElement(
                    action_id=ids.DECLINE_REASON_ACTION, multiline=True, max_length=REASON_MAX,
                    placeholder=PlainTextObject(text="e.g. wrong discount tier"),
                ),
            )
        ],
    )
    result: dict[str, Any] = view.to_dict()
    return result


def submitted_reason(view: dict[str, Any]) -> str | None:
    """The reason typed into a submitted form (trimmed, at most ``REASON_MAX``); None if blank."""
    values = view.get("state", {}).get("values", {})
    value = values.get(ids.DECLINE_REASON_BLOCK, {}).get(ids.DECLINE_REASON_ACTION, {})
    text = str(value.get("value") or "").strip()
    return text[:REASON_MAX] or None
