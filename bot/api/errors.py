"""The API's 4xx answers: ``{"error": code, "message": sentence, ...}``, one mapping."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from resume.outcomes import ApiRefusal, ApiRefused

_STATUS: dict[ApiRefusal, int] = {
    ApiRefusal.not_found: 404,
    ApiRefusal.tool_not_allowed: 403,
    ApiRefusal.no_longer_permitted: 403,
    ApiRefusal.invalid: 400,
    ApiRefusal.idempotency_conflict: 409,
    ApiRefusal.run_not_running: 409,
    ApiRefusal.not_approved: 409,
    ApiRefusal.already_executing: 409,
    ApiRefusal.already_executed: 409,
    ApiRefusal.changed: 409,
    ApiRefusal.blocked: 409,
    ApiRefusal.not_executing: 409,
    ApiRefusal.budget_exceeded: 409,
    ApiRefusal.calls_in_flight: 409,
}


class ApiError(web.HTTPException):
    """A 4xx with the API's error body; raised by handlers, rendered by aiohttp."""

    def __init__(
        self, http_status: int, code: str, message: str, fields: dict[str, Any] | None = None,
    ) -> None:
        self.status_code = http_status
        super().__init__(
            text=web.json_response({**(fields or {}), "error": code, "message": message}).text,
            content_type="application/json",
        )
        self.code = code


def refused(refusal: ApiRefused) -> ApiError:
    """An entry's refusal as its HTTP answer. A call that is not approved answers with
    its status as the code (``declined``, ``expired``, ``pending`` ...)."""
    code = refusal.code.value
    if refusal.code is ApiRefusal.not_approved:
        code = str(refusal.details.get("status", code))
    return ApiError(_STATUS[refusal.code], code, refusal.message, refusal.details)
