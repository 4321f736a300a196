"""Driving a held run: model step, tool calls, suspension; resumable from stored messages.

``drive`` works on a run this process holds (just asked, claimed, taken over
or continued) until it suspends, halts, answers or fails. It never holds a
transaction across a model or tool call; every write goes through the
``HeldRun`` and carries the lease epoch, so if another process takes the run
over, this one stops at its next write.

Every entry that leaves a run running returns a ``Drive``: the caller awaits
``drive.go()`` (a Slack listener spawns it after its ack), the same way for
every entry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from resume import apps, budget, calls, evidence, routes, runtime
from resume.held import HeldRun
from resume.messages import Message, ToolCall
from resume.model import ModelError
from resume.outcomes import CallOutcome, Stopped
from resume.routes import Routed
from resume.runtime import Runtime
from store import errors, ledger, records, runs
from store.events import EventKind
from store.reasons import FailReason, HaltReason
from store.records import Run
from store.states import LedgerStatus, RunState
from store.transitions import Effects

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Driven:
    """Where the run stopped, and what happened to each call settled on the way."""

    run: Run
    settled: dict[str, CallOutcome]

    def outcome_of(self, call_id: str) -> CallOutcome:
        """What happened to ``call_id``; Stopped when the run stopped before settling it."""
        return self.settled.get(call_id, Stopped(self.run))


@dataclass(frozen=True)
class Drive:
    """The rest of a run this process now holds. Await ``go()`` once, or spawn it."""

    rt: Runtime
    run: Run

    async def go(self) -> Driven:
        return await drive(self.rt, self.run)


async def drive(rt: Runtime, run: Run) -> Driven:
    """Work on ``run`` (held by this process at ``run.lease_epoch``) until it stops."""
    if run.state is not RunState.running or run.owner_id != rt.owner_id:
        return Driven(run, {})
    if run.external:
        return Driven(run, {})  # its agent lives elsewhere and goes on through the API
    held = await HeldRun.load(rt, run)
    try:
        async with held.keep_alive():
            final = await _work(held)
    except errors.LeaseLost:
        log.warning("lost the lease on run %s; another process carries on", run.id,
                    extra={"action": "lease_lost", "run_id": run.id})
        final = await runs.get(rt.db, run.id)
    return Driven(final, held.settled)


async def _work(held: HeldRun) -> Run:
    await _resolve_scope(held)
    waiting = {c.id for c in outstanding(held.conversation)}
    verdict = apps.check_snapshot(held.rt.app, held.run, waiting, held.conversation)
    if not verdict.ok:
        return await _fail(held, FailReason.snapshot_incompatible, verdict.detail or "")
    await _adopt(held, verdict)
    route: Routed | None = None
    if held.rt.app.router is not None:
        found = await routes.route_for(held.rt.db, held.rt.app.router, held.run)
        if isinstance(found, routes.RouteFailure):
            return await _fail(held, found.reason, found.detail)
        route = found
    try:
        return await _steps(held, route)
    except (errors.LeaseLost, errors.DatabaseUnavailable):
        raise
    except Exception as exc:
        # A bug in a tool's preview or guard, or in the app: stop loudly, never silently.
        log.exception("run %s stopped on an unexpected error", held.run.id,
                      extra={"action": FailReason.internal_error.value, "run_id": held.run.id})
        return await _fail(held, FailReason.internal_error, f"{type(exc).__name__}: {exc}")


async def _adopt(held: HeldRun, verdict: apps.SnapshotVerdict) -> None:
    """Record what resuming under this code changed: a migration (with its version bump)
    and a new app fingerprint, in one write."""
    events: list[tuple[str, dict[str, Any]]] = []
    extra: dict[str, Any] = {}
    if verdict.migrated is not None:
        events.append((EventKind.snapshot_migrated, verdict.migrated.event()))
        extra.update(verdict.migrated.values)
    if verdict.changed is not None:
        events.append((EventKind.app_changed, verdict.changed))
        extra["app_fingerprint"] = verdict.changed["to"]
    if events:
        await held.record(Effects(events=events), extra=extra)


async def _fail(held: HeldRun, reason: str, detail: str) -> Run:
    """Fail before every call is settled: a call still ``started`` will never be
    reconciled now, so the failure names it (and the ledger says ``unknown``)."""
    started = [e for e in await ledger.for_run(held.rt.db, held.run.id)
               if e.status is LedgerStatus.started]
    return await held.fail_naming(reason, detail, started)


async def _resolve_scope(held: HeldRun) -> None:
    """Record the scope as resolved now: every resume re-resolves it, never trusts the old one."""
    snapshot = held.scope.model_dump(mode="json")
    await held.record(
        Effects(events=[(EventKind.scope_resolved, {"tools": snapshot["tools"]})]),
        extra={"scope_snapshot": records.dumps(snapshot, what="scope"),
               "scope_resolved_at": held.rt.now()},
    )


async def _steps(held: HeldRun, route: Routed | None) -> Run:
    while True:
        waiting = outstanding(held.conversation)
        if waiting:
            for call in waiting:
                stopped = await calls.handle(held, call, route)
                if stopped is not None:
                    return stopped
            continue
        bound = budget.exceeded_before_step(held.run)
        if bound is not None:
            return await held.halt(bound)
        reply = await _model_step(held, route)
        if isinstance(reply, Run):
            return reply
        if not reply.tool_calls:
            return await _conclude(held, route, reply.content or "")


async def _model_step(held: HeldRun, route: Routed | None) -> Message | Run:
    app = held.rt.app
    system = app.system_prompt + (f"\n\n{route.branch.instructions}" if route else "")
    allowed = [t for t in app.tools if route is None or t.name in route.branch.tools]
    try:
        runtime.crash_point(runtime.DURING_MODEL_CALL)
        reply = await app.model.complete([Message.system(system), *held.conversation],
                                         [t.spec() for t in allowed])
    except ModelError as exc:
        return await held.halt(HaltReason.model_error, detail=str(exc))
    events: list[tuple[str, dict[str, Any]]] = [
        (EventKind.step, {"step": held.run.step + 1,
                          "tool_calls": [c.name for c in reply.message.tool_calls],
                          "cost_usd": reply.usage.cost_usd})
    ]
    await held.record(Effects(messages=[reply.message.model_dump(mode="json")], events=events),
                   steps=1, spend_usd=reply.usage.cost_usd)
    return reply.message


def outstanding(conversation: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    for i in range(len(conversation) - 1, -1, -1):
        message = conversation[i]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in conversation[i + 1:] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
    return []


async def _conclude(held: HeldRun, route: Routed | None, answer: str) -> Run:
    """A final answer counts only if the route's contract holds; otherwise the run fails."""
    entries = await ledger.for_run(held.rt.db, held.run.id)
    done = evidence.items(held.rt.app, entries)
    succeeded = {e.tool for e in entries if e.status is LedgerStatus.succeeded}
    required = route.branch.contract if route else held.rt.app.contract
    missing = [t for t in required if t not in succeeded]
    if missing:
        declined = await evidence.last_decline(held.rt.db, held.run.id)
        said = " ".join(answer.split())[:300]
        detail = None if declined else (
            f"the run ended without {', '.join(missing)} having succeeded"
            + (f"; the agent said: {said}" if said else ""))
        return await held.fail(FailReason.incomplete, missing=missing, done=done,
                               detail=detail, declined=declined)
    return await held.finish(answer, done)
