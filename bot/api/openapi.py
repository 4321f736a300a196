"""``GET /api/v1/openapi.json``: an OpenAPI 3.1 document generated from the route table.

Schemas come from the pydantic models (JSON Schema 2020-12, which OpenAPI 3.1
uses as is); paths, methods and statuses from ``bot.api.routes.ROUTES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from bot.api import models

if TYPE_CHECKING:
    from bot.api.routes import Route

_REF = "#/components/schemas/{model}"
_ERRORS = {
    "400": "The request is malformed (wrong types, unknown fields, too large a value)",
    "401": "No key, or an unknown or revoked one",
    "403": "The key may not call this tool, or the requester may no longer make the call",
    "404": "No such run or call for this key",
    "409": "The run or call is not in a state that allows this; `error` says which",
    "413": "The body is too large",
    "429": "The key is over its rate limit; see Retry-After",
}


def document(routes: Iterable[Route]) -> dict[str, Any]:
    routes = list(routes)
    used: set[type[BaseModel]] = {models.Error}
    for route in routes:
        used.update(m for m in (route.request, route.response) if m is not None)
    ordered = sorted(used, key=lambda m: m.__name__)
    _, schemas = models_json_schema([(m, "validation") for m in ordered], ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault("/api/v1" + route.path, {})[route.method.lower()] = _operation(route)
    paths["/api/v1/openapi.json"] = {"get": {
        "operationId": "openapi", "summary": "This document", "security": [],
        "responses": {"200": {"description": "The OpenAPI document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}},
    }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "signoff API", "version": "1.0.0",
                 "description": "Ask for approval from any agent; signoff's Slack cards, "
                                "claims, expiry and reconcile behind one HTTP API."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "A key from `signoff api-keys create`"}},
        },
        "security": [{"bearer": []}],
    }


def _operation(route: Route) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": _operation_id(route), "summary": route.summary}
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
              for name in re.findall(r"{(\w+)}", route.path)]
    params += [{"name": name, "in": "query", "required": False, "schema": schema}
               for name, schema in route.query.items()]
    if params:
        op["parameters"] = params
    if route.request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": _REF.format(model=route.request.__name__)}}}}
    responses: dict[str, Any] = {}
    for status in route.statuses:
        ok: dict[str, Any] = {"description": "OK" if status == 200 else "Created"}
        if route.response is not None:
            ok["content"] = {"application/json": {
                "schema": {"$ref": _REF.format(model=route.response.__name__)}}}
        responses[str(status)] = ok
    error = {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}}
    for code, description in _ERRORS.items():
        responses[code] = {"description": description, "content": error}
    op["responses"] = responses
    return op


def _operation_id(route: Route) -> str:
    return str(getattr(route.handler, "__name__", route.path))
