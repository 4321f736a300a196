"""Test-only variants of ``examples.quotes:app`` for the multi-replica scenarios.

Each is a ``SIGNOFF_APP`` target a ``signoff serve`` process loads:

- ``slow``: ``send_quote`` sleeps around its CRM write, so a replica can be
  killed while runs are mid-send. ``ACCEPTANCE_SEND_SECONDS`` is the total
  sleep; each call spends a share of it *before* the write (chosen from its
  idempotency key) and the rest after, so a kill finds some sends written and
  unrecorded (reconcile: done) and some not yet written (reconcile: not done).
- ``required_field``: ``send_quote``'s arguments gained a required field; a
  pending request saved by the old code no longer validates (incompatible).
- ``optional_field``: ``send_quote``'s arguments gained an optional field;
  the old pending request still validates (compatible, the change is recorded).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from typing import Any

from examples import quotes
from resume.apps import App
from resume.tools import ToolContext

SEND = "send_quote"
SEND_SECONDS_ENV = "ACCEPTANCE_SEND_SECONDS"
#: Shares of the sleep spent before the write, picked per call by its key.
BEFORE_SHARES = (0.0, 0.1, 0.2, 0.3)


class SendWithCurrency(quotes.SendArgs):
    currency: str


class SendWithNote(quotes.SendArgs):
    note: str | None = None


def _with_send(app: App, **changes: Any) -> App:
    tools = [dataclasses.replace(t, **changes) if t.name == SEND else t for t in app.tools]
    return dataclasses.replace(app, tools=tools)


def before_share(idempotency_key: str) -> float:
    digest = hashlib.sha256(idempotency_key.encode()).digest()
    return BEFORE_SHARES[digest[0] % len(BEFORE_SHARES)]


def slow() -> App:
    app = quotes.app()
    send = app.tool(SEND)
    assert send is not None
    original = send.execute
    total = float(os.environ.get(SEND_SECONDS_ENV, "4"))

    async def slow_send(args: quotes.SendArgs, ctx: ToolContext) -> dict[str, Any]:
        before = total * before_share(ctx.idempotency_key)
        await asyncio.sleep(before)
        result = await original(args, ctx)
        await asyncio.sleep(total - before)
        return result

    return _with_send(app, execute=slow_send)


def required_field() -> App:
    return _with_send(quotes.app(), args=SendWithCurrency)


def optional_field() -> App:
    return _with_send(quotes.app(), args=SendWithNote)

