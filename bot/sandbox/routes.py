"""The sandbox page's HTTP side: the page itself and the JSON API its script calls.

Routes: ``GET /`` (the page), ``GET /ui/state``, ``POST /ui/click``,
``POST /ui/command``, ``POST /ui/submit``, ``POST /ui/dismiss``, ``POST /ui/crm``.
Every request must pass ``bot.sandbox.guard`` first (the sandbox's own Host and
Origin, and on ``/ui/*`` the page's per-process token).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from bot import ids
from bot.sandbox import guard, signing
from bot.sandbox.page import JSON, Sandbox, required_text

STATIC = Path(__file__).parent / "static"

SANDBOX: web.AppKey[Sandbox] = web.AppKey("sandbox", Sandbox)


def _sandbox(request: web.Request) -> Sandbox:
    return request.app[SANDBOX]


async def _body(request: web.Request) -> JSON:
    try:
        data = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="expected a JSON object") from None
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return data


async def index(request: web.Request) -> web.Response:
    """The page, carrying this process's token for its script to send back."""
    html = (STATIC / "index.html").read_text().replace(guard.TOKEN_PLACEHOLDER,
                                                       _sandbox(request).ui_token)
    return web.Response(text=html, content_type="text/html",
                        headers={"Cache-Control": "no-store"})


async def favicon(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def state(request: web.Request) -> web.Response:
    sandbox = _sandbox(request)
    user = sandbox.person(request.query.get("user") or sandbox.people[0].id).id
    return web.json_response(await sandbox.state(user), headers={"Cache-Control": "no-store"})


async def click(request: web.Request) -> web.Response:
    sandbox, data = _sandbox(request), await _body(request)
    payload = sandbox.click_payload(sandbox.person(data.get("user")), data)
    return web.json_response(await sandbox.deliver(signing.form_body(payload)))


async def command(request: web.Request) -> web.Response:
    sandbox, data = _sandbox(request), await _body(request)
    person = sandbox.person(data.get("user"))
    channel = required_text(data, "channel")
    text = str(data.get("text") or "").strip()
    name, _, rest = text.partition(" ")
    if name.startswith("/"):  # "/signoff ask ..." or just "ask ..."
        text = rest.strip()
    body = signing.slash_command_body(
        person.id,
        text,
        channel,
        sandbox.fake.response_url(channel, user=person.id),
        sandbox.trigger(person.id),
        command=ids.COMMAND,
        user_name=person.name.lower(),
    )
    answer = await sandbox.deliver(body)
    sandbox.show_ack(answer, channel, person.id)
    return web.json_response(answer)


async def submit(request: web.Request) -> web.Response:
    sandbox, data = _sandbox(request), await _body(request)
    payload = sandbox.submission_payload(sandbox.person(data.get("user")), data)
    answer = await sandbox.deliver(signing.form_body(payload))
    response = answer.get("body")
    # An empty ack closes the modal; `response_action: errors` keeps it open.
    if answer["status"] == 200 and not (
        isinstance(response, dict) and response.get("response_action") == "errors"
    ):
        sandbox.close(payload["view"]["id"])
    return web.json_response(answer)


async def dismiss(request: web.Request) -> web.Response:
    sandbox, data = _sandbox(request), await _body(request)
    sandbox.close(required_text(data, "view_id"))
    return web.json_response({"ok": True})


async def crm(request: web.Request) -> web.Response:
    """``{"account": NAME, "credit_hold": BOOL}`` and/or ``{"account": NAME, "tier": TIER}``.

    Every part is checked before anything changes: a bad request is a 400 and
    leaves the CRM as it was.
    """
    sandbox, data = _sandbox(request), await _body(request)
    if sandbox.world is None:
        raise web.HTTPNotFound(text=f"{sandbox.app_ref} has no CRM to control")
    account = required_text(data, "account")
    known = [a["name"] for a in await sandbox.world.crm.all_accounts()]
    if account not in known:
        raise web.HTTPBadRequest(text=f"unknown account {account!r}; one of {', '.join(known)}")
    if "credit_hold" not in data and "tier" not in data:
        raise web.HTTPBadRequest(text="nothing to change: give credit_hold or tier")
    hold = data.get("credit_hold")
    if "credit_hold" in data and not isinstance(hold, bool):
        raise web.HTTPBadRequest(text="credit_hold must be true or false")
    tier = required_text(data, "tier") if "tier" in data else None
    if tier is not None and tier not in sandbox.world.tiers:
        raise web.HTTPBadRequest(
            text=f"unknown tier {tier!r}; one of {', '.join(sandbox.world.tiers)}")
    if isinstance(hold, bool):
        await sandbox.world.crm.set_credit_hold(account, hold)
    if tier is not None:
        await sandbox.world.crm.set_tier(account, tier)
    return web.json_response({"ok": True, "world": await sandbox.world_state()})


#: Request headers an API client sends that the bot's API reads.
_API_HEADERS = ("Authorization", "Content-Type", "Accept")
#: Response headers the bot's API sets that a client may act on.
_API_REPLY_HEADERS = ("Retry-After",)


async def api(request: web.Request) -> web.Response:
    """The bot's HTTP API on the page's port too: the address the banner prints first.

    Passed through unchanged to the bot, which authenticates every request; a
    long-poll waits here as long as it waits there (at most 30 s).
    """
    sandbox: Sandbox = request.app[SANDBOX]
    base = sandbox.events_url.removesuffix(ids.EVENTS_PATH)
    headers = {name: request.headers[name] for name in _API_HEADERS if name in request.headers}
    async with sandbox.session.request(request.method, base + request.rel_url.path_qs,
                                       headers=headers, data=await request.read()) as upstream:
        body = await upstream.read()
        reply = {name: upstream.headers[name] for name in _API_REPLY_HEADERS
                 if name in upstream.headers}
        reply["Content-Type"] = upstream.headers.get("Content-Type", "application/json")
        return web.Response(status=upstream.status, body=body, headers=reply)


def application(sandbox: Sandbox) -> web.Application:
    """The page and its JSON API as an aiohttp application."""
    app = web.Application(middlewares=[guard.middleware(sandbox.ui_token)])
    app[SANDBOX] = sandbox
    app.router.add_get("/", index)
    app.router.add_get("/favicon.ico", favicon)
    app.router.add_get("/ui/state", state)
    app.router.add_post("/ui/click", click)
    app.router.add_post("/ui/command", command)
    app.router.add_post("/ui/submit", submit)
    app.router.add_post("/ui/dismiss", dismiss)
    app.router.add_post("/ui/crm", crm)
    app.router.add_static("/static/", STATIC)
    app.router.add_route("*", "/api/v1/{tail:.*}", api)
    return app
