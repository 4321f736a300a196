"""Handlers for runs: create (external or hosted), read, finish, cancel."""

from __future__ import annotations

from aiohttp import web

from bot.api import hosted, models, wire
from bot.api.context import ApiContext
from bot.api.errors import refused
from resume import external, external_end, external_start
from resume.outcomes import ApiRefused, ExternalRun
from store.api_records import ApiKey


async def create_run(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    req = await wire.body(request, models.CreateRun)
    if not req.external:
        return await hosted.create(ctx, key, req)
    limits = req.limits.model_dump(exclude_none=True) if req.limits else {}
    started = await external_start.start_external(
        ctx.rt, key, requester=await hosted.requester_id(ctx, req.requester),
        title=req.title or "", idempotency_key=req.idempotency_key, limits=limits,
        request_digest=wire.digest(req),
    )
    if isinstance(started, ApiRefused):
        raise refused(started)
    out = await wire.run_out(ctx.rt.db, started.run, external=True)
    return wire.reply(out, 201 if started.created else 200)


async def get_run(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    owned = await external.owned_run(ctx.rt, key, request.match_info["run_id"], external=False)
    if isinstance(owned, ApiRefused):
        raise refused(owned)
    run, origin = owned
    return wire.reply(await wire.run_out(ctx.rt.db, run, external=origin.external))


async def finish(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    req = await wire.body(request, models.FinishRun)
    ended = await external_end.finish(ctx.rt, key, request.match_info["run_id"],
                                      answer=req.answer, requires=req.requires)
    return await _ended(ctx, ended)


async def cancel(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    ended = await external_end.cancel(ctx.rt, key, request.match_info["run_id"])
    return await _ended(ctx, ended)


async def _ended(ctx: ApiContext, ended: ExternalRun | ApiRefused) -> web.Response:
    if isinstance(ended, ApiRefused):
        raise refused(ended)
    ctx.services.kick()
    return wire.reply(await wire.run_out(ctx.rt.db, ended.run, external=True))
