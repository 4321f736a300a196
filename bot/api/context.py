"""What every API handler is given: the process's services, the caller's key, the limiter."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from bot.api.auth import RateLimiter
from bot.services import Services
from resume.runtime import Runtime
from store.api_records import ApiKey


@dataclass
class ApiContext:
    services: Services
    limiter: RateLimiter = field(default_factory=RateLimiter)
    #: Set when the server shuts down: long-polls answer with what they have.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def rt(self) -> Runtime:
        return self.services.rt


CONTEXT: web.AppKey[ApiContext] = web.AppKey("signoff.api", ApiContext)

#: A handler: the context, the authenticated key, the request.
Handler = Callable[[ApiContext, ApiKey, web.Request], Awaitable[web.Response]]
