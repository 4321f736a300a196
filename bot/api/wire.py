"""Reading request bodies and writing response bodies: the door's translation, both ways."""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from bot.api import models
from bot.api.errors import ApiError
from resume import budget
from store import ledger
from store.api_records import ApiCall
from store.engine import Database
from store.records import Run
from store.states import LedgerStatus

#: The largest request body accepted; larger ones get 413 and change nothing.
MAX_BODY_BYTES = 256 * 1024

M = TypeVar("M", bound=BaseModel)


async def body(request: web.Request, model: type[M]) -> M:
    """The request body validated as ``model``; 400/413 with the API's error body if not."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise _too_large()
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise _too_large()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(400, "invalid_request", f"{where}: {first['msg']}",
                       {"errors": len(exc.errors())}) from None


def _too_large() -> ApiError:
    return ApiError(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")


def digest(model: BaseModel) -> str:
    """The request's identity for idempotency: equal bodies, equal digests."""
    canonical = json.dumps(model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def reply(model: BaseModel, status: int = 200) -> web.Response:
    return web.json_response(text=model.model_dump_json(), status=status)


def call_out(call: ApiCall) -> models.Call:
    decision = None
    if call.decided_by is not None and call.decided_at is not None:
        decision = models.Decision(by=call.decided_by, at=call.decided_at, reason=call.reason)
    return models.Call(call_id=call.call_id, run_id=call.run_id, tool=call.tool,
                       status=call.status.value, decision=decision, expires_at=call.expires_at,
                       lease_until=call.lease_until)


async def run_out(db: Database, run: Run, *, external: bool) -> models.Run:
    limits = budget.limits_of(run)
    evidence = [
        models.Evidence(call_id=e.call_id, tool=e.tool, result=_result(e.result, external))
        for e in await ledger.for_run(db, run.id) if e.status is LedgerStatus.succeeded
    ]
    return models.Run(
        id=run.id, external=external, state=run.state.value, reason=run.halt_reason,
        requester=run.user_id, title=run.question, answer=run.answer, evidence=evidence,
        budget=models.Budget(steps=run.step, max_steps=limits.max_steps,
                             tool_calls=run.tool_calls, max_tool_calls=limits.max_tool_calls,
                             spend_usd=round(run.spend_usd, 6),
                             max_spend_usd=limits.max_spend_usd),
        started_at=run.started_at,
    )


def _result(stored: Any, external: bool) -> Any:
    # An external call's ledger result holds what the agent reported: result and evidence.
    if external and isinstance(stored, dict) and "result" in stored:
        return stored["result"]
    return stored
