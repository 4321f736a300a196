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
from store import approvals
from store.engine import Database
from store.records import Approval, Run

ASK = "draft a quote for Henderson, 200 of SKU-4411"


@dataclass
class QuotesWorld:
    rt: Runtime
    crm: CRM

    async def pending(self, run: Run) -> Approval:
        """The open approval of a suspended run."""
        mine = [a for a in await approvals.for_run(self.rt.db, run.id)
                if a.token == run.pending_token]
        assert mine, f"run {run.id} has no open approval (state {run.state})"
        return mine[0]


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
