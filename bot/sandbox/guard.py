"""Only the sandbox's own page may drive it: no other web page, no rebound DNS name.

The page's API approves cards, so a page on another site (a form or ``fetch``
to 127.0.0.1) or a DNS-rebinding name that resolves to 127.0.0.1 must not reach
it. Every request must name the sandbox's own address as ``Host``
(``127.0.0.1:PORT`` or ``localhost:PORT``), and an ``Origin``, when a browser
sends one, must be that address too. Every ``/ui/*`` request, reads included
(the state holds the cards' tokens), must carry the random per-process token
the page was served with (``X-Sandbox-Token``), which another site cannot read.
A request that fails gets ``403 {"error": ...}`` and nothing from the sandbox.
"""

from __future__ import annotations

import hmac
import logging

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-Sandbox-Token"
#: Where the page's HTML carries the token, for its script to send back.
TOKEN_PLACEHOLDER = "{{SANDBOX_TOKEN}}"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def middleware(token: str) -> Middleware:
    """An aiohttp middleware refusing what did not come from the sandbox's own page."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        why = refusal(request, token)
        if why is not None:
            log.warning("sandbox refused %s %s: %s", request.method, request.path, why,
                        extra={"action": "sandbox_refused", "host": request.host,
                               "origin": request.headers.get("Origin")})
            return web.json_response({"error": why}, status=403)
        return await handler(request)

    return check


def own_hosts(request: web.Request) -> frozenset[str]:
    """``Host`` values that name the socket this request arrived on."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return frozenset()
    return frozenset(f"{name}:{sockname[1]}" for name in _LOOPBACK_NAMES)


def refusal(request: web.Request, token: str) -> str | None:
    """Why this request is not from the sandbox's own page; None when it is."""
    hosts = own_hosts(request)
    if request.headers.get("Host", "") not in hosts:
        return "Host is not this sandbox's address"
    origin = request.headers.get("Origin")
    if origin is not None and origin not in {f"http://{host}" for host in hosts}:
        return "requests from other origins are refused"
    if request.path.startswith("/ui/"):
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return f"missing or wrong {TOKEN_HEADER}; reload the sandbox page"
    return None
