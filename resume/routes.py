"""Routers: an agent tree's choice of branch, recorded once and recovered, never re-decided.

A router's choice is an event of the run (router name, route, basis, how it
was decided, route-table digest), written in the same transaction as the step
that used it. Every later step reads it back: the route function is consulted
only for a run that has not taken a step yet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from store import events
from store.engine import Database
from store.records import Run

ROUTE_EVENT = "route"


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
    """The run's route, with its branch, and the event to record if it is new."""

    route: str
    branch: Branch
    new_event: dict[str, object] | None = None


@dataclass(frozen=True)
class RouteFailure:
    #: no_route: a fresh run the router could not place; route_lost: a resumed run with
    #: no recorded route; route_table_changed: the recorded route's table changed since.
    reason: Literal["no_route", "route_lost", "route_table_changed"]
    detail: str


async def route_for(db: Database, router: Router, run: Run) -> Routed | RouteFailure:
    """The route this step must follow.

    A run that has taken no step yet is routed by the route function; any
    other run must find its own recorded route (this run, this router) and the
    same route table, or it fails loudly.
    """
    recorded = [e for e in await events.for_run(db, run.id, kind=ROUTE_EVENT)
                if e.data.get("router") == router.name and e.run_id == run.id]
    if recorded:
        data = recorded[-1].data
        if data.get("table_digest") != router.digest():
            return RouteFailure(
                "route_table_changed",
                f"router {router.name!r} chose {data.get('route')!r} under a route table that has "
                "changed since; the run is not continued on a table it was not routed by",
            )
        branch = router.table.get(str(data["route"]))
        if branch is None:  # pragma: no cover - a changed table changes the digest
            return RouteFailure("route_table_changed", f"route {data['route']!r} is gone")
        return Routed(str(data["route"]), branch)
    if run.step > 0:
        return RouteFailure(
            "route_lost",
            f"run {run.id} has taken {run.step} step(s) but no route is recorded for router "
            f"{router.name!r}; refusing to re-decide or fall through",
        )
    decision = await router.decide(run.question, run.user_id)
    if decision is None or decision.route not in router.table:
        return RouteFailure(
            "no_route",
            f"router {router.name!r} could not choose a branch for this request"
            + (f" (it answered unknown route {decision.route!r})" if decision else ""),
        )
    event: dict[str, object] = {
        "router": router.name,
        "route": decision.route,
        "basis": decision.basis,
        "how": decision.how,
        "table_digest": router.digest(),
    }
    return Routed(decision.route, router.table[decision.route], new_event=event)
