"""Hosted runs through the API: the configured app's agent, started as `/signoff ask` starts it.

The requester may be given as an email; it is resolved to a Slack user id
with ``users.lookupByEmail`` (scope ``users:read.email``).
"""

from __future__ import annotations

from aiohttp import web
from slack_sdk.errors import SlackApiError

from bot.api import models, wire
from bot.api.context import ApiContext
from bot.api.errors import ApiError
from resume import loop, starting
from store import api_runs, runs
from store.api_records import ApiKey, ApiRun


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
    digest = wire.digest(req)
    existing = await api_runs.by_idempotency(ctx.rt.db, key.id, req.idempotency_key)
    if existing is not None:
        return await _again(ctx, existing, digest)
    user = await requester_id(ctx, req.requester)
    run = await starting.begin(ctx.rt, user, req.question or "")
    origin = api_runs.Origin(key_id=key.id, idempotency_key=req.idempotency_key,
                             request_digest=digest, external=False)
    linked = await api_runs.link(ctx.rt.db, run.id, origin, now=ctx.rt.now())
    ctx.services.spawn(loop.drive(ctx.rt, run), name=f"drive:{run.id}")
    if linked is None:  # a concurrent create with this key won: answer with its run
        again = await api_runs.by_idempotency(ctx.rt.db, key.id, req.idempotency_key)
        if again is not None:
            return await _again(ctx, again, digest)
    return wire.reply(await wire.run_out(ctx.rt.db, run, external=False), 201)


async def _again(ctx: ApiContext, existing: ApiRun, digest: str) -> web.Response:
    if existing.request_digest != digest:
        raise ApiError(409, "idempotency_conflict",
                       f"idempotency key {existing.idempotency_key!r} was used for run "
                       f"{existing.run_id} with another body; use a new key for a new run")
    run = await runs.get(ctx.rt.db, existing.run_id)
    return wire.reply(await wire.run_out(ctx.rt.db, run, external=existing.external))
