"""`signoff serve`: the Bolt app over HTTP or Socket Mode, health checks, metrics, the jobs.

Over HTTP Slack posts to ``/slack/events``; with ``SLACK_APP_TOKEN`` set the
same Bolt app also takes envelopes over Socket Mode (`bot.socket_mode`), and
HTTP still serves ``/healthz``, ``/readyz`` and ``/metrics``.

Start-up refuses, with one `error:` line and exit code 2, anything that would
make the bot look alive while it cannot work: missing Slack credentials, a
PostgreSQL schema that is not at head (SQLite is migrated in place), an app
that does not load. SIGTERM stops accepting requests, stops the scheduler,
lets in-flight work finish for a while, and exits 0; a run cut off there is
the next process's reaper's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.async_app import AsyncApp

from bot import bolt_app, config, ids, intake, logs, metrics, scheduler, socket_mode
from bot.api import add_api_routes
from bot.services import Services
from resume import apps
from resume.apps import App
from resume.runtime import Runtime
from store import engine, errors, migrate
from store.engine import Database

log = logging.getLogger(__name__)

EXIT_OK, EXIT_NOT_SET_UP, EXIT_UNREACHABLE = 0, 2, 3  # as `signoff --help` lists them
#: How long a graceful stop waits for in-flight listeners and runs.
DRAIN_SECONDS = 20.0
_SERVICES: web.AppKey[Services] = web.AppKey("signoff.services", Services)


class Transport:
    """How Slack reaches this server: the Bolt app, and its Socket Mode connection if any."""

    def __init__(self, bolt: AsyncApp) -> None:
        self.bolt = bolt
        self.socket: socket_mode.TimedSocketModeHandler | None = None


TRANSPORT: web.AppKey[Transport] = web.AppKey("signoff.transport", Transport)


class NotReady(Exception):
    """signoff cannot serve with this configuration; the message says what to fix."""


#: Bolt silently switches to OAuth (multi-workspace installs) when these are set;
#: signoff is a single-workspace bot with a static token, so they are dropped.
_OAUTH_VARIABLES = ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET")


def _refuse_oauth_switch() -> None:
    for name in _OAUTH_VARIABLES:
        if os.environ.pop(name, None):
            log.warning("%s is set but signoff uses a static bot token; ignoring it", name,
                        extra={"action": "config_ignored", "variable": name})


async def build_server(
    settings: config.Settings, *, app: App | None = None, db: Database | None = None
) -> tuple[web.Application, Services]:
    """The aiohttp application and the services behind it, ready to be served.

    ``app`` overrides ``SIGNOFF_APP`` and ``db`` overrides ``DATABASE_URL``
    (tests, the sandbox and the bench pass their own). The caller serves the
    application, starts the scheduler if it wants one, and on the way out
    drains and closes the services.
    """
    settings.require_slack()  # ConfigError before anything is opened
    _refuse_oauth_switch()
    database = db or engine.connect(settings.database_url)
    try:
        await _schema(database)
        runtime = Runtime(
            db=database,
            app=app or load_app(settings.app),
            suspension_ttl=settings.suspension_ttl,
            orphan_after=settings.orphan_after,
            execution_lease=settings.execution_lease,
            max_recovery_attempts=settings.max_recovery_attempts,
            retention=settings.retention,
            approvals_channel=settings.approvals_channel,
        )
    except BaseException:
        if db is None:
            await database.dispose()
        raise
    _warn_if_cards_go_to_the_wrong_person(runtime)
    _warn_if_requesters_decide_their_own(runtime)
    services = Services(rt=runtime, settings=settings, client=bolt_app.web_client(settings))
    bolt = bolt_app.build(services)
    web_app = bolt.web_app(path=ids.EVENTS_PATH, port=settings.port)
    # Before Bolt: only signed, first-seen requests the bot handles; it times each click's ack.
    web_app.middlewares.append(intake.middleware(
        ids.EVENTS_PATH, settings.require_slack().signing_secret, runtime.db))
    web_app[_SERVICES] = services
    web_app[TRANSPORT] = Transport(bolt)
    web_app.router.add_get(ids.HEALTH_PATH, _healthz)
    web_app.router.add_get(ids.READY_PATH, _readyz)
    metrics.install(web_app, ids.METRICS_PATH, runtime, settings.metrics_token)
    add_api_routes(web_app, services)
    return web_app, services


async def open_socket_mode(web_app: web.Application, settings: config.Settings) -> None:
    """Connect over Socket Mode if ``SLACK_APP_TOKEN`` is set (`NotReady` if refused)."""
    if not settings.socket_mode:
        return
    transport = web_app[TRANSPORT]
    try:
        transport.socket = await socket_mode.connect(transport.bolt, settings.app_token())
    except socket_mode.ConnectionRefused as exc:
        raise NotReady(str(exc)) from exc


async def close_socket_mode(web_app: web.Application) -> None:
    """Stop taking envelopes (before the drain, like closing the HTTP listener)."""
    transport = web_app[TRANSPORT]
    if transport.socket is not None:
        await transport.socket.close()
        transport.socket = None


async def _schema(db: Database) -> None:
    """SQLite is migrated in place (one process owns it); PostgreSQL must already be at head."""
    if db.is_sqlite:
        await migrate.upgrade(db)
        return
    try:
        await migrate.require_head(db)
    except errors.SchemaOutdated as exc:
        raise NotReady(str(exc)) from exc


def _warn_if_cards_go_to_the_wrong_person(rt: Runtime) -> None:
    """Without an approvals channel a card is a DM to the requester, who may not be allowed
    to approve it: say so at start, not when the first card waits for nobody."""
    if rt.approvals_channel is not None:
        return
    others = [t.name for t in rt.app.tools
              if t.approvers.listed("") or t.approvers.policy() is not None]
    if others:
        log.warning("tools %s are approved by people other than the requester, but "
                    "SIGNOFF_APPROVALS_CHANNEL is unset: their cards go to the requester's DM; "
                    "set it to a channel the approvers are in", ", ".join(sorted(others)),
                    extra={"action": "approvals_channel_missing", "tools": sorted(others)})


def _warn_if_requesters_decide_their_own(rt: Runtime) -> None:
    """Self-approval is a choice an app makes: name each tool that leaves it on."""
    for tool in rt.app.tools:
        if tool.confirm is not False and tool.approvers.requester_may_decide():
            log.warning("tool %s asks for approval, and whoever asked may approve their own "
                        "call; to require someone else, give it Approvers(..., "
                        "allow_requester=False)", tool.name,
                        extra={"action": "self_approval_allowed", "tool": tool.name})


def load_app(ref: str) -> App:
    """The app ``ref`` names (``SIGNOFF_APP``); NotReady, with one line, when it names none."""
    try:
        return apps.load(ref)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise NotReady(f"SIGNOFF_APP={ref} does not name an app: "
                       f"{type(exc).__name__}: {exc}") from exc


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _readyz(request: web.Request) -> web.Response:
    services = request.app[_SERVICES]
    try:
        await services.rt.db.ping()
    except errors.DatabaseUnavailable:
        return web.json_response({"ok": False, "database": "unreachable"}, status=503)
    answer: dict[str, object] = {"ok": True, "database": "reachable"}
    socket = request.app[TRANSPORT].socket
    if socket is not None:
        # Reported, not required: the SDK reconnects on its own, and a replica without
        # its socket still serves the API and runs the jobs.
        up = await socket_mode.connected(socket)
        answer["socket_mode"] = "connected" if up else "reconnecting"
    return web.json_response(answer)


# --- The process ---------------------------------------------------------------------


async def serve(settings: config.Settings) -> int:
    """Serve until SIGTERM or SIGINT, then stop gracefully."""
    web_app, services = await build_server(settings)
    runner = web.AppRunner(web_app, access_log=None, handle_signals=False)
    await runner.setup()
    jobs: AsyncIOScheduler | None = None
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        await open_socket_mode(web_app, settings)
        jobs = scheduler.start(services)  # one reaper pass right away
        log.info("signoff serving on %s:%s%s", settings.host, settings.port,
                 " and over Socket Mode" if settings.socket_mode else "",
                 extra={"action": "serve", "owner_id": services.rt.owner_id,
                        "socket_mode": settings.socket_mode})
        await until_stopped()
    finally:
        log.info("signoff stopping", extra={"action": "stop"})
        await close_socket_mode(web_app)
        if jobs is not None:
            await scheduler.stop(jobs)
        await runner.cleanup()
        with contextlib.suppress(TimeoutError):
            await services.drain(DRAIN_SECONDS)
        await services.close()
    return EXIT_OK


async def until_stopped() -> None:
    """Wait for SIGTERM or SIGINT (``signoff serve`` and ``signoff sandbox``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def main(settings: config.Settings) -> int:
    """`signoff serve`. Exit 2 with one readable line when signoff is not set up."""
    logs.configure(settings.log_format, secrets=settings.secret_values())
    try:
        return asyncio.run(serve(settings))
    except (config.ConfigError, NotReady) as exc:
        return _not_set_up(str(exc))
    except errors.DatabaseMissing as exc:
        return _not_set_up(str(exc))
    except errors.DatabaseUnavailable as exc:
        return _not_set_up(f"{exc}; check DATABASE_URL, or try again once it is up",
                           EXIT_UNREACHABLE)
    except OSError as exc:  # the port is taken, most often
        return _not_set_up(f"cannot listen on {settings.host}:{settings.port}: "
                           f"{exc.strerror or exc}; stop what uses it or pick another --port")


def _not_set_up(message: str, code: int = EXIT_NOT_SET_UP) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
