"""A quotes app on a test database: the runtime, the CRM, and shortcuts to drive it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from examples import quotes
from examples.crm import CRM
from resume.budget import Limits
from resume.model import Model
from resume.runtime import Runtime
from store.engine import Database
from tests import world

ASK = "draft a quote for Henderson, 200 of SKU-4411"


@dataclass
class QuotesWorld(world.World):
    crm: CRM


async def quotes_world(
    db: Database,
    *,
    model: Model | None = None,
    limits: Limits | None = None,
    clock: Callable[[], datetime] | None = None,
    **runtime: Any,
) -> QuotesWorld:
    crm = CRM(db)
    await crm.setup()
    app = quotes.build(crm, model, limits=limits)
    rt = Runtime(db=db, app=app, **runtime)
    if clock is not None:
        rt.clock = clock
    return QuotesWorld(rt, crm)
