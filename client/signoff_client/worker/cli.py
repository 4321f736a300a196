"""``signoff-worker module:attr``: start the resume worker the user's module builds.

``attr`` is a ``Worker``; or a function returning one (``async`` too); or an async context
manager function yielding one, for agents that need resources open while they run (a
LangGraph checkpointer). Only what that module imports is imported: a framework comes in
with the gate that uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any, NoReturn

from signoff_client.client import Signoff
from signoff_client.worker.core import Worker

EXIT_OK, EXIT_FAILED, EXIT_NOT_SET_UP = 0, 1, 2

DESCRIPTION = ("Resume agents paused on signoff calls once people decide. MODULE:ATTR names "
               "your Worker (or a function, or an async context manager function, that makes "
               "one) with each agent registered by name. It long-polls the pending calls, or, "
               "with --webhook-port, waits for the key's webhooks (create the key with "
               "--webhook http://HOST:PORT/webhook). Stop it with SIGTERM or Ctrl-C.")


def fail(message: str, code: int = EXIT_NOT_SET_UP) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="signoff-worker", description=DESCRIPTION)
    p.add_argument("target", metavar="MODULE:ATTR", help="where your Worker is, e.g. "
                   "myagents.worker:worker")
    p.add_argument("--url", help="signoff's URL (default: $SIGNOFF_URL)")
    p.add_argument("--api-key", help="the agents' API key (default: $SIGNOFF_API_KEY; prefer "
                   "the variable: an argument is visible to other users in ps)")
    p.add_argument("--webhook-port", type=_port, metavar="PORT",
                   help="receive the key's webhooks on PORT instead of long-polling")
    p.add_argument("--webhook-host", default="127.0.0.1",
                   help="the host the receiver binds (default: %(default)s)")
    p.add_argument("--webhook-secret", metavar="WHSEC", help="the key's webhook signing "
                   "secret (default: $SIGNOFF_WEBHOOK_SECRET; prefer the variable)")
    return p


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    url = args.url or os.environ.get("SIGNOFF_URL", "")
    api_key = args.api_key or os.environ.get("SIGNOFF_API_KEY", "")
    secret = args.webhook_secret or os.environ.get("SIGNOFF_WEBHOOK_SECRET", "")
    if not url:
        fail("--url (or SIGNOFF_URL) is required")
    if not api_key:
        fail("--api-key (or SIGNOFF_API_KEY) is required")
    if args.webhook_port is not None and not secret:
        fail("--webhook-port needs the key's signing secret: --webhook-secret "
             "(or SIGNOFF_WEBHOOK_SECRET)")
    if args.webhook_port is not None:
        check_webhooks(secret)
    target = load(args.target)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    asyncio.run(serve(target, url, api_key, args.webhook_port, args.webhook_host, secret))
    return EXIT_OK


def check_webhooks(secret: str) -> None:
    try:
        from signoff_client.worker.webhooks import WebhookReceiver
    except ImportError:
        fail("--webhook-port needs aiohttp and standardwebhooks: "
             "pip install './client[worker]' (from a checkout of signoff)")
    try:
        WebhookReceiver(secret, lambda: None)
    except Exception:  # the library's own errors for a malformed secret vary
        fail("--webhook-secret is not a webhook signing secret (whsec_...)")


def load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        fail(f"{target!r} is not MODULE:ATTR (e.g. myagents.worker:worker)")
    sys.path.insert(0, os.getcwd())  # a module next to where the command runs, as python -m
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fail(f"cannot import {module_name}: {exc}")
    found = getattr(module, attr, None)
    if found is None:
        fail(f"{module_name} has no {attr}")
    return found


@contextlib.asynccontextmanager
async def opened(target: Any) -> AsyncIterator[Worker]:
    """The Worker ``target`` is, returns, or yields."""
    if isinstance(target, Worker):
        yield target
        return
    if not callable(target):
        fail(f"{target!r} is not a Worker, nor a function that makes one", EXIT_FAILED)
    made = target()
    if inspect.isawaitable(made):
        made = await made
    if isinstance(made, contextlib.AbstractAsyncContextManager):
        async with made as worker:
            yield _checked(worker)
        return
    yield _checked(made)


def _checked(made: Any) -> Worker:
    if not isinstance(made, Worker):
        fail(f"the target made {type(made).__name__}, not a Worker", EXIT_FAILED)
    return made


async def serve(target: Any, url: str, api_key: str, webhook_port: int | None,
                webhook_host: str, secret: str) -> None:
    async with opened(target) as worker, Signoff(url, api_key) as so:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.stop)
        if webhook_port is None:
            await worker.serve(so)
            return
        from signoff_client.worker.webhooks import WebhookReceiver

        receiver = WebhookReceiver(secret, worker.wake, host=webhook_host, port=webhook_port)
        try:
            await receiver.start()
        except OSError as exc:
            fail(f"--webhook-port {webhook_port}: cannot listen on {webhook_host} ({exc})",
                 EXIT_FAILED)
        try:
            await worker.serve(so, webhooks=True)
        finally:
            await receiver.stop()
