"""`signoff sandbox`: the bot, a Slack stand-in and the sandbox page, in one process.

Three servers on 127.0.0.1, one event loop:

- the Web API stand-in (`FakeSlack`), which stores every posted, updated and
  ephemeral message and every opened modal;
- the bot, built by `bot.server.build_server` exactly as `signoff serve`
  builds it (Bolt with signature verification on, health checks, the
  scheduler and the outbox notifier), with ``SLACK_API_URL`` pointed at the
  stand-in and a bot token and signing secret generated for this process;
- the page (`bot.sandbox.page`) on the port asked for, which signs what a
  person does on it and POSTs it to the bot's ``/slack/events``.

Nothing listens beyond 127.0.0.1 and nothing calls out: the demo apps use a
scripted model unless both ``SIGNOFF_MODEL_URL`` and ``SIGNOFF_MODEL_API_KEY``
are set (then they call that model API).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import SecretStr

from bot import config, ids, scheduler, server
from bot.sandbox import fake_slack, page, routes
from bot.sandbox import socket_mode as socket_mode_standin
from resume import App

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
#: The sandbox's own database unless DATABASE_URL (or --database-url) names one:
#: trying the sandbox never touches the ./signoff.db that `signoff serve` uses.
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./signoff-sandbox.db"
EXIT_OK, EXIT_NOT_SET_UP = 0, 2
#: How long stopping waits for clicks and runs in flight.
DRAIN_SECONDS = 10.0
#: Variables that would switch Bolt to OAuth (and a workspace) if inherited.
_OAUTH_VARIABLES = ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET")


@dataclass(frozen=True)
class Running:
    """Where each part of a started sandbox listens."""

    url: str
    events_url: str
    api_url: str
    database_url: str
    app_ref: str
    #: The stand-in's Socket Mode side, when the bot is on it (``--socket-mode``).
    socket: socket_mode_standin.SocketModeServer | None = None

    @property
    def socket_mode(self) -> bool:
        return self.socket is not None


def sandbox_settings(
    settings: config.Settings, app_ref: str, api_url: str, *, socket_mode: bool = False
) -> config.Settings:
    """``settings`` for a bot that talks only to the stand-in at ``api_url``.

    The token and signing secret are new for every process; the database is
    the sandbox's own unless one was given; approval cards go to a channel
    both sandbox people can see, unless SIGNOFF_APPROVALS_CHANNEL says otherwise.
    """
    chosen = "database_url" in settings.model_fields_set
    return settings.model_copy(
        update={
            "slack_bot_token": SecretStr(f"xoxb-sandbox-{secrets.token_hex(12)}"),
            "slack_signing_secret": SecretStr(secrets.token_hex(16)),
            "slack_api_url": api_url,
            "database_url": settings.database_url if chosen else DEFAULT_DATABASE_URL,
            "app": app_ref,
            "approvals_channel": settings.approvals_channel or page.APPROVALS_CHANNEL,
            "host": HOST,
            "slack_app_token": SecretStr(f"xapp-sandbox-{secrets.token_hex(12)}")
            if socket_mode else None,
        }
    )


async def world_panel(app: App) -> page.World | None:
    """The panel the app gives the page for its world (``App.world``), if it gives one."""
    if app.world is None:
        return None
    controls = await app.world()
    return page.World(crm=controls, tiers=list(controls.tiers))


@asynccontextmanager
async def _serving(app: web.Application, port: int) -> AsyncIterator[int]:
    """Serve ``app`` on 127.0.0.1:``port`` (0: any free port); yield the port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, HOST, port).start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


@asynccontextmanager
async def started(
    settings: config.Settings, app_ref: str, port: int, socket_mode: bool = False
) -> AsyncIterator[Running]:
    """Start the stand-in, the bot and the page; stop them all on the way out."""
    for name in _OAUTH_VARIABLES:
        os.environ.pop(name, None)
    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(
            fake_slack.FakeSlack(host=HOST, user_names={p.id: p.name.lower() for p in page.PEOPLE})
        )
        for channel, name in page.CHANNELS.items():
            fake.workspace.channels[channel] = {"id": channel, "name": name, "is_im": False}
        bot_settings = sandbox_settings(settings, app_ref, fake.api_url, socket_mode=socket_mode)
        # The example apps open their own tables on DATABASE_URL (see examples.quotes).
        os.environ["DATABASE_URL"] = bot_settings.database_url
        app = server.load_app(bot_settings.app)
        world = await world_panel(app)
        web_app, services = await server.build_server(bot_settings, app=app)
        stack.push_async_callback(services.close)
        stack.push_async_callback(_drain, services)
        bot_port = await stack.enter_async_context(_serving(web_app, 0))
        await server.open_socket_mode(web_app, bot_settings)  # with --socket-mode only
        stack.push_async_callback(server.close_socket_mode, web_app)
        jobs = scheduler.start(services)
        stack.push_async_callback(scheduler.stop, jobs)
        session = await stack.enter_async_context(aiohttp.ClientSession())
        events_url = f"http://{HOST}:{bot_port}{ids.EVENTS_PATH}"
        credentials = bot_settings.require_slack()
        sandbox = page.Sandbox(
            fake=fake,
            events_url=events_url,
            signing_secret=credentials.signing_secret,
            session=session,
            app_ref=app_ref,
            world=world,
            examples=list(app.examples),
            transport=fake.socket_mode.deliver_form if socket_mode else None,
        )
        page_port = await stack.enter_async_context(_serving(routes.application(sandbox), port))
        yield Running(
            url=f"http://{HOST}:{page_port}/",
            events_url=events_url,
            api_url=fake.api_url,
            database_url=bot_settings.database_url,
            app_ref=app_ref,
            socket=fake.socket_mode if socket_mode else None,
        )


async def _drain(services: Any) -> None:
    with contextlib.suppress(TimeoutError):
        await services.drain(DRAIN_SECONDS)


def banner(running: Running) -> str:
    return "\n".join(
        [
            f"signoff sandbox: open {running.url}",
            f"  app       {running.app_ref}",
            f"  database  {running.database_url}",
            "  bot       over Socket Mode (envelopes on the stand-in's WebSocket)"
            if running.socket_mode
            else f"  bot       {running.events_url} (signed requests only)",
            f"  API       {running.url}api/v1/ (a key: DATABASE_URL={running.database_url} "
            "signoff api-keys create NAME)",
            f"  Slack     stand-in Web API at {running.api_url}",
            "Everything listens on 127.0.0.1. Press Ctrl+C to stop.",
        ]
    )


async def run(settings: config.Settings, app_ref: str, port: int,
              socket_mode: bool = False) -> int:
    """Start everything, print where, and serve until SIGINT or SIGTERM."""
    async with started(settings, app_ref, port, socket_mode) as running:
        print(banner(running), flush=True)
        await server.until_stopped()
    return EXIT_OK


def main(settings: config.Settings, app_ref: str, port: int, socket_mode: bool = False) -> int:
    """`signoff sandbox`. Exit 2 with one readable line when it cannot start."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    try:
        return asyncio.run(run(settings, app_ref, port, socket_mode))
    except (config.ConfigError, server.NotReady) as exc:
        return _not_set_up(str(exc))
    except (ImportError, AttributeError) as exc:  # the app's module, before the bot loads it
        return _not_set_up(f"--app {app_ref} does not name an app: {type(exc).__name__}: {exc}")
    except OSError as exc:  # the port is taken, most often
        return _not_set_up(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}")


def _not_set_up(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_NOT_SET_UP
