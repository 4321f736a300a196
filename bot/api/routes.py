"""The API's route table: registered on the sub-app and described by the OpenAPI document.

One table serves both, so the document cannot drift from what is served; its
schemas are generated from the pydantic models in ``bot.api.models``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from bot import metrics
from bot.api import auth, calls, models, openapi, runs, webhooks
from bot.api.context import CONTEXT, ApiContext, Handler
from bot.api.errors import ApiError
from bot.services import Services
from store import call_watch, errors
from store.states import CallStatus

log = logging.getLogger(__name__)

PREFIX = "/api/v1"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    #: The success statuses, for the document (the first is the usual one).
    statuses: tuple[int, ...] = (200,)
    query: dict[str, dict[str, Any]] = field(default_factory=dict)


_RUN = "/runs/{run_id}"
_CALL = _RUN + "/calls/{call_id}"

ROUTES: tuple[Route, ...] = (
    Route("POST", "/runs", runs.create_run, "Start a run: external, or hosted by the app",
          models.CreateRun, models.Run, (201, 200)),
    Route("GET", _RUN, runs.get_run, "A run: state, reason, budget, answer, evidence",
          response=models.Run),
    Route("POST", _RUN + "/finish", runs.finish, "End an external run with its answer",
          models.FinishRun, models.Run),
    Route("POST", _RUN + "/cancel", runs.cancel, "Cancel an external run", response=models.Run),
    Route("POST", _RUN + "/calls", calls.request_call, "Ask for approval of one call",
          models.RequestCall, models.Call, (201, 200)),
    Route("GET", _CALL, calls.get_call, "A call; with wait=N, long-poll until it changes",
          response=models.Call,
          query={"wait": {"type": "number", "minimum": 0, "maximum": calls.MAX_WAIT_SECONDS}}),
    Route("POST", _CALL + "/execute", calls.execute, "Claim the execution of an approved call",
          models.ExecuteCall, models.Execution),
    Route("POST", _CALL + "/result", calls.report, "Report what the call did",
          models.ReportResult, models.Call),
    Route("POST", _CALL + "/heartbeat", calls.heartbeat, "Extend the execution lease",
          response=models.Call),
    Route("GET", "/calls", calls.list_calls, "The key's calls, by status (e.g. unknown)",
          response=models.CallList,
          query={"status": {"type": "string", "enum": [s.value for s in CallStatus]}}),
)


def add_api_routes(app: web.Application, services: Services) -> None:
    """Serve the API under ``/api/v1/`` on ``app``, with its background work."""
    sub = web.Application(middlewares=[_counted, _json_errors])
    sub[CONTEXT] = ApiContext(services)
    for route in ROUTES:
        sub.router.add_route(route.method, route.path, _guarded(route.handler))
    document = openapi.document(ROUTES)

    async def serve_document(_request: web.Request) -> web.Response:
        return web.json_response(document)

    sub.router.add_get("/openapi.json", serve_document)
    sub.cleanup_ctx.append(_background)
    sub.on_shutdown.append(_stopping)
    app.add_subapp(PREFIX, sub)


@web.middleware
async def _counted(request: web.Request, handler: Any) -> web.StreamResponse:
    """Count every answer in ``signoff_api_requests_total``, by path template (never the ids)."""
    matched = request.match_info.route  # aiohttp's 404/405 match no resource
    route = "unmatched" if matched.resource is None else \
        f"{matched.method} {matched.resource.canonical}"
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        metrics.api_request(route, exc.status)
        raise
    except asyncio.CancelledError:  # the client went away (a long-poll, say): nginx's 499
        metrics.api_request(route, 499)
        raise
    except Exception:
        metrics.api_request(route, 500)
        raise
    metrics.api_request(route, response.status)
    return response


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """aiohttp's own 404/405 (no such path or method) in the API's error shape."""
    try:
        response: web.StreamResponse = await handler(request)
    except ApiError:
        raise
    except web.HTTPException as exc:
        if exc.status >= 500:
            raise
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "invalid_request")
        raise ApiError(exc.status, code, f"{request.method} {request.path}: {exc.reason}"
                       ) from None
    return response


def _guarded(handler: Handler) -> Any:
    async def handle(request: web.Request) -> web.Response:
        ctx = request.app[CONTEXT]
        try:
            key = await auth.authenticate(ctx.rt.db, request)
            ctx.limiter.take(key.id)
            return await handler(ctx, key, request)
        except errors.DatabaseUnavailable as exc:
            log.warning("API request failed: %s", exc, extra={"action": "api_unavailable"})
            raise ApiError(503, "unavailable", "the database is unreachable; retry") from None

    return handle


async def _stopping(sub: web.Application) -> None:
    sub[CONTEXT].stopping.set()


async def _background(sub: web.Application) -> AsyncIterator[None]:
    """Wake long-polls on every replica's changes (PostgreSQL), and deliver webhooks."""
    ctx = sub[CONTEXT]
    listener = call_watch.Listener(ctx.rt.db)
    try:
        await listener.start()
    except errors.DatabaseUnavailable as exc:  # waiters still re-read every second
        log.warning("LISTEN failed: %s", exc, extra={"action": "listen_failed"})
    sender = webhooks.WebhookSender(ctx.rt.db)
    sender.start()
    try:
        yield
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sender.stop(), call_watch.STOP_SECONDS)
        await listener.stop()
