"""The Approve and Decline buttons on an approval card.

Both ack first. Approve then claims (one guarded UPDATE: quick) and, for the
winner, runs the rest — scope, preview, guards, the tool, the loop — in the
background after the HTTP response has gone. The card itself is replaced
through the outbox: the claim enqueued that update in its own transaction.
Decline first asks the store whether the clicker could decide (the same
answers Approve gives: not an approver, already decided, expired, ...) and
says so instead of opening the form; otherwise it opens the reason form,
whose submission decides (`decline_reason`) after checking again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ids, metrics
from bot.cards import decline_form, replies
from bot.services import Services
from resume import decide, outcomes
from store import errors

log = logging.getLogger(__name__)

#: How long a Decline click waits on the store before opening the reason form unchecked.
#: Slack's trigger id lasts 3 s from the click, and network and the ack have used some.
DECLINE_CHECK_SECONDS = 1.0


def register(app: AsyncApp) -> None:
    app.action(ids.APPROVE_ACTION)(on_approve)
    app.action(ids.DECLINE_ACTION)(on_decline)


async def on_approve(
    ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, context: AsyncBoltContext
) -> None:
    """Approve: claim the request for the clicker, or tell them why not."""
    async with Services.of(context).tracked() as services:
        await ack()
        token, user = _token(body), _user(body)
        try:
            decided = await decide.decide(services.rt, token, "approve", user,
                                          team_id=user_team(body))
        except errors.DatabaseUnavailable:
            await _tell(respond, replies.unavailable())
            return
        if isinstance(decided, outcomes.Claimed):
            carry_on(services, decided, user)
        else:
            await _tell(respond, refused(decided, user))


async def on_decline(
    ack: AsyncAck,
    body: dict[str, Any],
    client: AsyncWebClient,
    respond: AsyncRespond,
    context: AsyncBoltContext,
) -> None:
    """Decline: open the reason form for someone who could decide; tell anyone else why not."""
    async with Services.of(context).tracked() as services:
        await ack()
        token, user = _token(body), _user(body)
        # Only someone who could decide gets the form. The trigger id is good for 3 s,
        # so the store gets a bounded share of that; past it the form opens anyway
        # (the submission checks again, and that check is the one that counts).
        try:
            refusal = await asyncio.wait_for(decide.refusal(services.rt, token, user,
                                                             team_id=user_team(body)),
                                             DECLINE_CHECK_SECONDS)
        except errors.DatabaseUnavailable:
            await _tell(respond, replies.unavailable())
            return
        except TimeoutError:
            log.warning("decline check took over %ss; opening the form unchecked",
                        DECLINE_CHECK_SECONDS, extra={"action": "decline_check_slow",
                                                      "user": user})
            refusal = None
        if refusal is not None:
            await _tell(respond, refused(refusal, user))
            return
        try:
            await client.views_open(trigger_id=body["trigger_id"],
                                    view=decline_form.reason_view(token))
        except SlackApiError as exc:
            log.warning("could not open the decline form: %s", exc.response.get("error"),
                        extra={"action": "decline_form_failed", "user": user})
            await _tell(respond, replies.decline_form_failed())


def carry_on(services: Services, claimed: outcomes.Claimed, user: str) -> None:
    """The winner's run goes on in the background, after the ack.

    The card update was enqueued by the claim itself; ``carry_on`` kicks it out now.
    """
    log.info("run %s claimed by %s (%s)", claimed.run.id, user, claimed.decision,
             extra={"action": "click_won", "run_id": claimed.run.id, "user": user})
    metrics.decided(claimed)
    metrics.waited(claimed)
    services.carry_on(claimed.drive)


def refused(refusal: outcomes.Refusal, user: str) -> str:
    """Why a decision changed nothing, as the person reads it (and logged)."""
    log.info("decision by %s refused: %s", user, type(refusal).__name__,
             extra={"action": "click_refused", "user": user})
    metrics.decided(refusal)
    return replies.refusal(refusal)


async def _tell(respond: AsyncRespond, text: str) -> None:
    await respond(text=text, response_type="ephemeral", replace_original=False)


def _token(body: dict[str, Any]) -> str:
    return str(body["actions"][0].get("value") or "")


def _user(body: dict[str, Any]) -> str:
    return str(body["user"]["id"])


def user_team(body: dict[str, Any]) -> str | None:
    """The clicker's own workspace: ``user.team_id`` (a Slack Connect guest's is theirs)."""
    user = body.get("user")
    team = user.get("team_id") if isinstance(user, dict) else None
    return team if isinstance(team, str) else None
