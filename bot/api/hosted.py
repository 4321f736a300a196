"""Hosted runs through the API: the configured app's agent, started as `/signoff ask` starts it.

The requester may be given as an email; it is resolved to a Slack user id
with ``users.lookupByEmail`` (scope ``users:read.email``).
"""

from __future__ import annotations

from aiohttp import web
from slack_sdk.errors import SlackApiError

from bot.api import models, wire
from bot.api.context import ApiContext
from bot.api.errors import ApiError, refused
from resume import hosted_start
from resume.outcomes import ApiRefused
from store.api_records import ApiKey


async def requester_id(ctx: ApiContext, requester: str) -> str:
    """A Slack user id as given, or the id of the user with this email."""
    if "@" not in requester:
        return requester
    try:
        found = await ctx.services.client.users_lookupByEmail(email=requester)
    except SlackApiError as exc:
        raise ApiError(400, "unknown_requester",
                       f"no Slack user has the email {requester!r} "
                       f"({exc.response.get('error', 'lookup failed')})") from None
    user = found.get("user") or {}
    user_id = user.get("id") if isinstance(user, dict) else None
    if not isinstance(user_id, str) or not user_id:
        raise ApiError(400, "unknown_requester", f"no Slack user has the email {requester!r}")
    return user_id


async def create(ctx: ApiContext, key: ApiKey, req: models.CreateRun) -> web.Response:
    """Start the app's agent on ``req.question``, once per idempotency key."""
    started = await hosted_start.start_hosted(
        ctx.rt, key, requester=await requester_id(ctx, req.requester),
        question=req.question or "", idempotency_key=req.idempotency_key,
        request_digest=wire.digest(req))
    if isinstance(started, ApiRefused):
        raise refused(started)
    if started.drive is not None:
        ctx.services.spawn(started.drive.go(), name=f"drive:{started.run.id}")
    out = await wire.run_out(ctx.rt.db, started.run, external=False)
    return wire.reply(out, 201 if started.created else 200)
