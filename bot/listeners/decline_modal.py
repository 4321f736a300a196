"""The decline-reason modal: opened by the Decline button, submitted to decline.

The button opens it only for someone who could decide the request then
(``decide.refusal``); the submission decides through ``decide.decide``
all the same, since the request may be decided or expire while the modal is open.

The pending token travels in the view's ``private_metadata``. Submission acks
(closing the modal) before it claims; a refusal is told to the person as an
ephemeral message in the card's channel, since a closed modal has no
response_url.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.models.blocks import InputBlock, PlainTextInputElement, PlainTextObject
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot import ids, replies
from bot.listeners import decisions
from bot.services import Services
from resume import decide, outcomes
from store import approvals, errors

#: Longest reason accepted; the model and the card both get it whole.
REASON_MAX = 500


def reason_view(token: str) -> dict[str, Any]:
    """The modal asking for an optional reason (validated by slack_sdk's models)."""
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
                label=PlainTextObject(text="Reason (optional)"),
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
    values = view.get("state", {}).get("values", {})
    value = values.get(ids.DECLINE_REASON_BLOCK, {}).get(ids.DECLINE_REASON_ACTION, {})
    text = str(value.get("value") or "").strip()
    return text[:REASON_MAX] or None


def register(app: AsyncApp, services: Services) -> None:
    async def on_submit(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        async with services.tracked():
            await ack()
            view = body["view"]
            token, user = str(view.get("private_metadata") or ""), str(body["user"]["id"])
            try:
                decided = await decide.decide(services.rt, token, "decline", user,
                                                    reason=submitted_reason(view))
                decisions.settle(services, decided, user)
                if isinstance(decided, outcomes.Claimed):
                    return
                text = replies.refusal(decided)
            except errors.DatabaseUnavailable:
                text = replies.unavailable()
            await _tell(services, client, token, user, text)

    app.view_submission(ids.DECLINE_REASON_CALLBACK)(on_submit)


async def _tell(services: Services, client: AsyncWebClient, token: str, user: str,
                text: str) -> None:
    """Ephemeral in the card's channel; a DM when the card's place is not known."""
    approval = None
    try:
        approval = await approvals.get(services.rt.db, token) if token else None
    except errors.DatabaseUnavailable:
        pass
    if approval is not None and approval.slack_channel:
        await client.chat_postEphemeral(channel=approval.slack_channel, user=user, text=text)
    else:
        await client.chat_postMessage(channel=user, text=text)
