"""Routers: an agent tree's choice of branch, recorded once and recovered, never re-decided.

A router's choice is an event of the run (router name, route, basis, how it
was decided, route-table digest), written when the run is created, in the same
transaction (``choose``, from ``resume.ask.ask``). Every drive reads it
back (``route_for``): the route function is never consulted once the run
exists, so a crash or a halt during the first model call cannot re-decide.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from store import events
from store.engine import Database
from store.events import EventKind
from store.reasons import FailReason
from store.records import Run


class Branch(BaseModel):
    """One route: its instructions, the tools it may use, and its contract."""

    model_config = ConfigDict(frozen=True)

    instructions: str
    tools: list[str]
    #: Tools that must have succeeded for a run on this branch to count as answered.
    contract: list[str] = []


class RouteDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    route: str
    basis: str
    how: Literal["model", "rule", "person"] = "rule"


#: The route function: (question, user id) -> a decision, or None when it cannot tell.
RouteFunction = Callable[[str, str], Awaitable[RouteDecision | None]]


@dataclass(frozen=True)
class Router:
    name: str
    table: dict[str, Branch]
    decide: RouteFunction
    description: str = field(default="")

    def digest(self) -> str:
        canonical = json.dumps(
            {name: branch.model_dump(mode="json") for name, branch in self.table.items()},
            sort_keys=True, separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Routed:
    """The run's route, as recorded, with its branch."""

    route: str
    branch: Branch


@dataclass(frozen=True)
class Choice:
    """The router's answer for a new run: the event to record with it (and its route)."""

    kind: EventKind  #: route, or no_route when the router placed the run nowhere
    data: dict[str, object]
    route: str | None


@dataclass(frozen=True)
class RouteFailure:
    #: no_route: the router placed the run nowhere at start; route_lost: no route is
    #: recorded for the run; route_table_changed: the recorded route's table changed since.
    reason: FailReason
    detail: str


async def choose(router: Router, question: str, user_id: str) -> Choice:
    """Ask the route function, once, for a run about to be created."""
    try:
        decision = await router.decide(question, user_id)
    except Exception as exc:
        # A route function can be a model call: its error places the run nowhere, loudly.
        return _nowhere(router, f"router {router.name!r} could not choose a branch "
                                f"({type(exc).__name__}: {exc})")
    if decision is None or decision.route not in router.table:
        return _nowhere(router, f"router {router.name!r} could not choose a branch for this "
                        "request" + (f" (it answered unknown route {decision.route!r})"
                                     if decision else ""))
    return Choice(EventKind.route, {
        "router": router.name,
        "route": decision.route,
        "basis": decision.basis,
        "how": decision.how,
        "table_digest": router.digest(),
    }, decision.route)


def _nowhere(router: Router, detail: str) -> Choice:
    return Choice(EventKind.no_route, {"router": router.name, "detail": detail}, None)


async def route_for(db: Database, router: Router, run: Run) -> Routed | RouteFailure:
    """The route this step must follow: the one recorded for this run and this router.

    Never asks the route function (``choose`` did, when the run was created).
    A run without a recorded route, or whose route table changed since, fails loudly.
    """
    recorded = await _recorded(db, router, run, EventKind.route)
    if recorded is None:
        nowhere = await _recorded(db, router, run, EventKind.no_route)
        if nowhere is not None:
            return RouteFailure(FailReason.no_route, str(nowhere.get("detail", "")))
        return RouteFailure(
            FailReason.route_lost,
            f"no route is recorded for run {run.id} and router {router.name!r} (it has taken "
            f"{run.step} step(s)); refusing to re-decide or fall through",
        )
    if recorded.get("table_digest") != router.digest():
        return RouteFailure(
            FailReason.route_table_changed,
            f"router {router.name!r} chose {recorded.get('route')!r} under a route table that "
            "has changed since; the run is not continued on a table it was not routed by",
        )
    branch = router.table.get(str(recorded["route"]))
    if branch is None:  # pragma: no cover - a changed table changes the digest
        return RouteFailure(FailReason.route_table_changed, f"route {recorded['route']!r} is gone")
    return Routed(str(recorded["route"]), branch)


async def _recorded(db: Database, router: Router, run: Run, kind: str) -> dict[str, Any] | None:
    """The latest ``kind`` event of this run by this router; another run's or router's never."""
    mine = [e for e in await events.for_run(db, run.id, kind=kind)
            if e.run_id == run.id and e.data.get("router") == router.name]
    return mine[-1].data if mine else None
