"""Handlers for one external call: ask, wait, claim its execution, report, keep alive."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from aiohttp import web

from bot.api import models, wire
from bot.api.context import ApiContext
from bot.api.errors import ApiError, refused
from resume import call_execute, call_report, call_request, external
from resume.outcomes import ApiRefused
from resume.tools import Preview
from store import api_calls, call_watch
from store.api_records import ApiCall, ApiKey
from store.states import CallStatus

#: The longest ``?wait=`` a long-poll may ask for, in seconds.
MAX_WAIT_SECONDS = 30
#: A waiter re-reads its call at least this often, whatever wakes it (or does not).
POLL_SECONDS = 1.0
#: Statuses that change only when someone else acts: a long-poll waits on these.
_WAITABLE = frozenset({CallStatus.pending, CallStatus.executing, CallStatus.unknown})


def _preview(p: models.PreviewIn) -> Preview:
    return Preview(title=p.title, fields=list(p.fields), body=p.body)


async def request_call(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    req = await wire.body(request, models.RequestCall)
    ttl = timedelta(minutes=req.ttl_minutes) if req.ttl_minutes is not None else None
    asked = call_request.CallRequest(
        call_id=req.call_id, tool=req.tool, args=dict(req.args), preview=_preview(req.preview),
        approvers=tuple(req.approvers.users) if req.approvers else (), ttl=ttl,
        spend_usd=req.spend_usd, request_digest=wire.digest(req),
    )
    result = await call_request.request_call(ctx.rt, key, request.match_info["run_id"], asked)
    if isinstance(result, ApiRefused):
        raise refused(result)
    ctx.services.kick()  # the approval card goes out now
    return wire.reply(wire.call_out(result.call), 201 if result.created else 200)


async def get_call(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    run_id, call_id = request.match_info["run_id"], request.match_info["call_id"]
    wait = _wait_seconds(request)
    owned = await external.owned_run(ctx.rt, key, run_id)
    if isinstance(owned, ApiRefused):
        raise refused(owned)
    call = await _wait_for_change(ctx, run_id, call_id, wait)
    return wire.reply(wire.call_out(call))


def _wait_seconds(request: web.Request) -> float:
    raw = request.query.get("wait", "0")
    try:
        wait = float(raw)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise ApiError(400, "invalid_request",
                       f"wait must be a number of seconds from 0 to {MAX_WAIT_SECONDS}")
    return wait


async def _wait_for_change(ctx: ApiContext, run_id: str, call_id: str, wait: float) -> ApiCall:
    """The call once its status differs from the first one read, or after ``wait`` seconds.

    The watch is registered before each read, so a change committed between a
    read and the wait still wakes this waiter (in this process directly; from
    other replicas by NOTIFY, or by the re-read every ``POLL_SECONDS``).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    first: CallStatus | None = None
    with call_watch.watching(run_id, call_id) as changed:
        while True:
            changed.clear()
            call = await api_calls.get(ctx.rt.db, run_id, call_id)
            if call is None:
                raise refused(external.call_not_found(run_id, call_id))
            first = first or call.status
            remaining = deadline - loop.time()
            if call.status is not first or first not in _WAITABLE or remaining <= 0:
                return call
            if ctx.stopping.is_set():
                return call  # shutting down: answer now; the client polls again elsewhere
            woken = [asyncio.ensure_future(changed.wait()),
                     asyncio.ensure_future(ctx.stopping.wait())]
            _, pending = await asyncio.wait(woken, timeout=min(remaining, POLL_SECONDS),
                                            return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()


async def execute(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    req = await wire.body(request, models.ExecuteCall)
    ex = call_execute.Execution(preview=_preview(req.preview), guard_ok=req.guard.ok,
                                guard_code=req.guard.code, guard_message=req.guard.message,
                                permitted=req.permitted)
    result = await call_execute.execute(ctx.rt, key, request.match_info["run_id"],
                                        request.match_info["call_id"], ex)
    ctx.services.kick()  # a changed card, a blocked card, a halt notice
    if isinstance(result, ApiRefused):
        raise refused(result)
    return wire.reply(models.Execution(idempotency_key=result.idempotency_key,
                                       lease_seconds=result.lease_seconds,
                                       call=wire.call_out(result.call)))


async def report(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    req = await wire.body(request, models.ReportResult)
    result = await call_report.report(ctx.rt, key, request.match_info["run_id"],
                                      request.match_info["call_id"], status=req.status,
                                      result=req.result, evidence=req.evidence)
    if isinstance(result, ApiRefused):
        raise refused(result)
    ctx.services.kick()
    return wire.reply(wire.call_out(result.call))


async def heartbeat(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    result = await call_report.heartbeat(ctx.rt, key, request.match_info["run_id"],
                                         request.match_info["call_id"])
    if isinstance(result, ApiRefused):
        raise refused(result)
    return wire.reply(wire.call_out(result.call))


async def list_calls(ctx: ApiContext, key: ApiKey, request: web.Request) -> web.Response:
    raw = request.query.get("status")
    try:
        status = CallStatus(raw) if raw is not None else None
    except ValueError:
        raise ApiError(400, "invalid_request", f"status must be one of "
                       f"{', '.join(s.value for s in CallStatus)}") from None
    found = await api_calls.for_key(ctx.rt.db, key.id, status=status)
    return wire.reply(models.CallList(calls=[wire.call_out(c) for c in found]))
