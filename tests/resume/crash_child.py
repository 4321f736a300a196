"""A separate OS process that works on a quotes run and is SIGKILLed at a named point.

    SIGNOFF_FAULT_AT=<point> python -m tests.resume.crash_child start   URL VARIANT
    SIGNOFF_FAULT_AT=<point> python -m tests.resume.crash_child approve URL VARIANT TOKEN
    SIGNOFF_FAULT_AT=<point> python -m tests.resume.crash_child recover URL VARIANT

``start`` starts the reference run (it suspends at send_quote); ``approve``
approves a pending token as the requester and resumes the run (the confirmed
send); ``recover`` runs one reaper pass. With ``SIGNOFF_FAULT_AT`` set the
process kills itself at that point (resume/runtime.py); if it gets to the end
instead it prints one JSON line and exits 0, which the parent treats as a
failed test. VARIANT ``reconcile`` is the quotes app as shipped; ``blind`` is
the same app whose send_quote cannot reconcile (no ``reconcile``, not
idempotent), so an unknown send must fail the run ``outcome_unknown``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Any

from examples import quotes
from examples.crm import CRM
from resume import reap
from resume.apps import App
from resume.runtime import Runtime
from store import engine
from tests import journeys

REQUESTER = "U_REP"
ASK = "draft a quote for Henderson, 200 of SKU-4411"
VARIANTS = ("reconcile", "blind")


def build_app(crm: CRM, variant: str) -> App:
    """The app both the child and the recovering parent run: same tools, same fingerprint."""
    app = quotes.build(crm)
    if variant == "reconcile":
        return app
    if variant != "blind":
        raise SystemExit(f"unknown variant {variant!r}: one of {VARIANTS}")
    tools = [dataclasses.replace(t, reconcile=None, idempotent=False)
             if t.name == "send_quote" else t for t in app.tools]
    return dataclasses.replace(app, tools=tools)


async def main(argv: list[str]) -> dict[str, Any]:
    mode, url, variant, *rest = argv
    db = engine.connect(url)
    try:
        crm = CRM(db)
        await crm.setup()
        rt = Runtime(db=db, app=build_app(crm, variant))
        if mode == "start":
            run = await journeys.start(rt, REQUESTER, ASK)
            return {"run_id": run.id, "state": run.state.value, "token": run.pending_token}
        if mode == "approve":
            (token,) = rest
            outcome = await journeys.resume_after_confirmation(rt, token, "approve",
                                                                   REQUESTER)
            return {"outcome": type(outcome).__name__}
        if mode == "recover":
            report = await reap.recover_orphans(rt)
            return {"recovered": [r.id for r in report.recovered],
                    "exhausted": [r.id for r in report.exhausted]}
        raise SystemExit(f"unknown mode {mode!r}: use start, approve or recover")
    finally:
        await db.dispose()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))), flush=True)
