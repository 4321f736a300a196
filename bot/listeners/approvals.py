"""The Approve and Decline buttons on an approval card.

Both ack first. Approve then claims (one guarded UPDATE: quick) and, for the
winner, runs the rest — scope, preview, guards, the tool, the loop — in the
background after the HTTP response has gone. The card itself is replaced
through the outbox: the claim enqueued that update in its own transaction.
Decline first asks the store whether the clicker could decide (the same
answers Approve gives: not an approver, already decided, expired, ...) and
says so instead of opening the form; otherwise it opens the reason modal,
whose submission decides (`decline_modal`) after checking again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ids, replies
from bot.listeners import decisions, decline_modal
from bot.services import Services
from resume import decide, outcomes
from store import errors

log = logging.getLogger(__name__)

#: How long a Decline click waits on the store before opening the reason form unchecked.
#: Slack's trigger id lasts 3 s from the click, and network and the ack have used some.
DECLINE_CHECK_SECONDS = 1.0


def register(app: AsyncApp, services: Services) -> None:
    async def on_approve(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        async with services.tracked():
            await ack()
            token, user = _token(body), _user(body)
            try:
                decided = await decide.decide(services.rt, token, "approve", user)
            except errors.DatabaseUnavailable:
                await _tell(respond, replies.unavailable())
                return
            decisions.settle(services, decided, user)
            if not isinstance(decided, outcomes.Claimed):
                await _tell(respond, replies.refusal(decided))

    async def on_decline(
        ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond
    ) -> None:
        async with services.tracked():
            await ack()
            token, user = _token(body), _user(body)
            # Only someone who could decide gets the form. The trigger id is good for 3 s,
            # so the store gets a bounded share of that; past it the form opens anyway
            # (the submission checks again, and that check is the one that counts).
            try:
                refused = await asyncio.wait_for(decide.refusal(services.rt, token, user),
                                                 DECLINE_CHECK_SECONDS)
            except errors.DatabaseUnavailable:
                await _tell(respond, replies.unavailable())
                return
            except TimeoutError:
                log.warning("decline check took over %ss; opening the form unchecked",
                            DECLINE_CHECK_SECONDS, extra={"action": "decline_check_slow",
                                                          "user": user})
                refused = None
            if refused is not None:
                decisions.settle(services, refused, user)
                await _tell(respond, replies.refusal(refused))
                return
            try:
                await client.views_open(trigger_id=body["trigger_id"],
                                        view=decline_modal.reason_view(token))
            except SlackApiError as exc:
                log.warning("could not open the decline form: %s", exc.response.get("error"),
                            extra={"action": "decline_form_failed", "user": user})
                await _tell(respond, replies.decline_form_failed())

    app.action(ids.APPROVE_ACTION)(on_approve)
    app.action(ids.DECLINE_ACTION)(on_decline)


async def _tell(respond: AsyncRespond, text: str) -> None:
    await respond(text=text, response_type="ephemeral", replace_original=False)


def _token(body: dict[str, Any]) -> str:
    return str(body["actions"][0].get("value") or "")


def _user(body: dict[str, Any]) -> str:
    return str(body["user"]["id"])
