"""The OpenAPI document is served, generated from the models, and valid OpenAPI 3.1."""

from __future__ import annotations

import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from bot.api import auth, models, routes
from bot.api.errors import ApiError
from tests.bot.harness import BotWorld


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_openapi__served_valid_3_1_and_covers_every_route(world: BotWorld) -> None:
    async with world.http.get(world.url + "/api/v1/openapi.json") as response:
        assert response.status == 200
        document = await response.json()
    validate(document, cls=OpenAPIV31SpecValidator)  # raises on an invalid document
    assert document["openapi"] == "3.1.0"
    with pytest.raises(Exception, match="is not of type"):  # it does refuse a bad one
        validate({**document, "paths": {"/x": {"get": {"responses": 7}}}},
                 cls=OpenAPIV31SpecValidator)
    served = {(r.method.lower(), "/api/v1" + r.path) for r in routes.ROUTES}
    described = {(m, p) for p, ops in document["paths"].items() for m in ops}
    assert served <= described
    schemas = document["components"]["schemas"]
    assert set(schemas["RequestCall"]["properties"]) == set(models.RequestCall.model_fields)
    assert "call_id" in schemas["RequestCall"]["required"]
    status_enum = schemas["Call"]["properties"]["status"]["enum"]
    assert "unknown" in status_enum and "blocked" in status_enum


def test_rate_limit__a_burst_then_429_with_retry_after_then_refilled() -> None:
    now = [0.0]
    limiter = auth.RateLimiter(rate=2, burst=3, clock=lambda: now[0])
    for _ in range(3):
        limiter.take("key_a")
    with pytest.raises(ApiError) as over:
        limiter.take("key_a")
    assert over.value.status_code == 429 and over.value.headers["Retry-After"] == "1"
    limiter.take("key_b")  # another key has its own bucket
    now[0] = 0.5
    limiter.take("key_a")
