"""`signoff serve`: the Bolt app over HTTP, health checks, and the scheduled jobs.

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

from bot import app as bolt_app
from bot import config, ids, intake, scheduler
from bot.api import add_api_routes
from bot.services import Services
from resume import apps
from resume.apps import App
from resume.runtime import Runtime
from store import engine, errors, migrate
from store.engine import Database

log = logging.getLogger(__name__)

EXIT_OK, EXIT_NOT_SET_UP = 0, 2
#: How long a graceful stop waits for in-flight listeners and runs.
DRAIN_SECONDS = 20.0
_SERVICES: web.AppKey[Services] = web.AppKey("signoff.services", Services)


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
            app=app or _load_app(settings.app),
            suspension_ttl=settings.suspension_ttl,
            orphan_after=settings.orphan_after,
            max_recovery_attempts=settings.max_recovery_attempts,
            retention=settings.retention,
            approvals_channel=settings.approvals_channel,
        )
    except BaseException:
        if db is None:
            await database.dispose()
        raise
    _warn_if_cards_go_to_the_wrong_person(runtime)
    services = Services(rt=runtime, settings=settings, client=bolt_app.web_client(settings))
    web_app = bolt_app.build(services).web_app(path=ids.EVENTS_PATH, port=settings.port)
    # Before Bolt: a malformed signed body gets 400, not Bolt's 500 (see bot/intake.py).
    web_app.middlewares.append(
        intake.middleware(ids.EVENTS_PATH, settings.require_slack().signing_secret))
    web_app[_SERVICES] = services
    web_app.router.add_get(ids.HEALTH_PATH, _healthz)
    web_app.router.add_get(ids.READY_PATH, _readyz)
    add_api_routes(web_app, services)
    return web_app, services


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


def _load_app(ref: str) -> App:
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
    return web.json_response({"ok": True, "database": "reachable"})


# --- The process ---------------------------------------------------------------------


async def serve(settings: config.Settings) -> int:
    """Serve until SIGTERM or SIGINT, then stop gracefully."""
    web_app, services = await build_server(settings)
    runner = web.AppRunner(web_app, access_log=None, handle_signals=False)
    await runner.setup()
    jobs: AsyncIOScheduler | None = None
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
        jobs = scheduler.start(services)  # one reaper pass right away
        log.info("signoff serving on %s:%s", settings.host, settings.port,
                 extra={"action": "serve", "owner_id": services.rt.owner_id})
        await until_stopped()
    finally:
        log.info("signoff stopping", extra={"action": "stop"})
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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # One line per job run every two seconds drowns everything else out.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    try:
        return asyncio.run(serve(settings))
    except (config.ConfigError, NotReady) as exc:
        return _not_set_up(str(exc))
    except errors.DatabaseUnavailable as exc:
        return _not_set_up(f"{exc}; check DATABASE_URL")


def _not_set_up(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_NOT_SET_UP
