"""The submitted decline form: decline the request, with the reason given.

The button opens the form only for someone who could decide the request then
(``decide.refusal``); the submission decides through ``decide.decide``
all the same, since the request may be decided or expire while the form is open.

The pending token travels in the view's ``private_metadata``. Submission acks
(closing the modal) before it claims; a refusal is told to the person as an
ephemeral message in the card's channel, since a closed modal has no
response_url.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot import ids
from bot.cards import decline_form, replies
from bot.listeners import buttons
from bot.services import Services
from resume import decide, outcomes
from store import claims, errors


def register(app: AsyncApp) -> None:
    app.view_submission(ids.DECLINE_REASON_CALLBACK)(on_submit)


async def on_submit(
    ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    """Decline with the submitted reason, or tell the person why nothing changed."""
    async with Services.of(context).tracked() as services:
        await ack()
        view = body["view"]
        token, user = str(view.get("private_metadata") or ""), str(body["user"]["id"])
        try:
            decided = await decide.decide(services.rt, token, "decline", user,
                                          reason=decline_form.submitted_reason(view),
                                          team_id=buttons.user_team(body))
            if isinstance(decided, outcomes.Claimed):
                buttons.carry_on(services, decided, user)
                return
            text = buttons.refused(decided, user)
        except errors.DatabaseUnavailable:
            text = replies.unavailable()
        await _tell(services, client, token, user, text)


async def _tell(services: Services, client: AsyncWebClient, token: str, user: str,
                text: str) -> None:
    """Ephemeral in the card's channel; a DM when the card's place is not known."""
    approval = None
    try:
        approval = await claims.approval(services.rt.db, token) if token else None
    except errors.DatabaseUnavailable:
        pass
    if approval is not None and approval.slack_channel:
        await client.chat_postEphemeral(channel=approval.slack_channel, user=user, text=text)
    else:
        await client.chat_postMessage(channel=user, text=text)
