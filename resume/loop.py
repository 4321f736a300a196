"""The agent loop: model step, tool calls, suspension; resumable from stored messages.

``drive`` works on a run this process holds (just created, claimed, taken
over or continued) until it suspends, halts, answers or fails. It never holds
a transaction across a model or tool call, and every write carries the lease
epoch: if another process takes the run over, this one stops at its next write.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from resume import budget, calls, compat, faults, routes
from resume.messages import Message, ToolCall
from resume.model import ModelError
from resume.notices import EvidenceItem
from resume.outcomes import CallOutcome
from resume.routes import Routed
from resume.runtime import Runtime
from resume.worker import Worker, keep_alive
from store import api_runs, codec, errors, ledger, messages, runs
from store.effects import Effects
from store.records import Run
from store.states import LedgerStatus, RunState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Driven:
    run: Run
    settled: dict[str, CallOutcome]


async def drive(rt: Runtime, run: Run) -> Driven:
    """Work on ``run`` (held by this process at ``run.lease_epoch``) until it stops."""
    if run.state is not RunState.running or run.owner_id != rt.owner_id:
        return Driven(run, {})
    if run.app_fingerprint == api_runs.EXTERNAL_FINGERPRINT:
        return Driven(run, {})  # its agent lives elsewhere and goes on through the API
    stored = await messages.load(rt.db, run.id)
    worker = Worker(rt, run, [Message.model_validate(m) for m in stored],
                    scope=await rt.app.scope(run.user_id))
    try:
        async with keep_alive(rt, run):
            final = await _work(worker)
    except errors.LeaseLost:
        log.warning("lost the lease on run %s; another process carries on", run.id,
                    extra={"action": "lease_lost", "run_id": run.id})
        final = await runs.get(rt.db, run.id)
    return Driven(final, worker.settled)


async def _work(w: Worker) -> Run:
    await _resolve_scope(w)
    verdict = compat.check(w.rt.app, w.run, {c.id for c in _outstanding(w.conversation)},
                           w.conversation)
    if not verdict.ok:
        return await _fail(w, "snapshot_incompatible", verdict.detail or "")
    await _adopt(w, verdict)
    route: Routed | None = None
    if w.rt.app.router is not None:
        found = await routes.route_for(w.rt.db, w.rt.app.router, w.run)
        if isinstance(found, routes.RouteFailure):
            return await _fail(w, found.reason, found.detail)
        route = found
    try:
        return await _steps(w, route)
    except (errors.LeaseLost, errors.DatabaseUnavailable):
        raise
    except Exception as exc:
        # A bug in a tool's preview or guard, or in the app: stop loudly, never silently.
        log.exception("run %s stopped on an unexpected error", w.run.id,
                      extra={"action": "internal_error", "run_id": w.run.id})
        return await _fail(w, "internal_error", f"{type(exc).__name__}: {exc}")


async def _adopt(w: Worker, verdict: compat.Verdict) -> None:
    """Record what resuming under this code changed: a migration (with its version bump)
    and a new app fingerprint, in one write."""
    events: list[tuple[str, dict[str, Any]]] = []
    extra: dict[str, Any] = {}
    if verdict.migrated is not None:
        events.append((compat.MIGRATED_EVENT, verdict.migrated.event()))
        extra.update(verdict.migrated.values)
    if verdict.changed is not None:
        events.append(("app_changed", verdict.changed))
        extra["app_fingerprint"] = verdict.changed["to"]
    if events:
        await w.record(Effects(events=events), extra=extra)


async def _fail(w: Worker, reason: str, detail: str) -> Run:
    """Fail before every call is settled: a call still ``started`` will never be
    reconciled now, so the failure names it (and the ledger says ``unknown``)."""
    started = [e for e in await ledger.for_run(w.rt.db, w.run.id)
               if e.status is LedgerStatus.started]
    return await calls.fail(w, reason, detail, started)


async def _resolve_scope(w: Worker) -> None:
    """Record the scope as resolved now: every resume re-resolves it, never trusts the old one."""
    snapshot = w.scope.model_dump(mode="json")
    await w.record(
        Effects(events=[("scope_resolved", {"tools": snapshot["tools"]})]),
        extra={"scope_snapshot": codec.dumps(snapshot, what="scope"),
               "scope_resolved_at": w.rt.now()},
    )


async def _steps(w: Worker, route: Routed | None) -> Run:
    while True:
        outstanding = _outstanding(w.conversation)
        if outstanding:
            for call in outstanding:
                stopped = await calls.handle(w, call, route)
                if stopped is not None:
                    return stopped
            continue
        bound = budget.exceeded_before_step(w.run)
        if bound is not None:
            return await w.halt(bound)
        reply = await _model_step(w, route)
        if isinstance(reply, Run):
            return reply
        if not reply.tool_calls:
            return await _conclude(w, route, reply.content or "")


async def _model_step(w: Worker, route: Routed | None) -> Message | Run:
    app = w.rt.app
    system = app.system_prompt + (f"\n\n{route.branch.instructions}" if route else "")
    allowed = [t for t in app.tools if route is None or t.name in route.branch.tools]
    try:
        faults.point(faults.DURING_MODEL_CALL)
        reply = await app.model.complete([Message.system(system), *w.conversation],
                                         [t.spec() for t in allowed])
    except ModelError as exc:
        return await w.halt("model_error", detail=str(exc))
    events: list[tuple[str, dict[str, Any]]] = [
        ("step", {"step": w.run.step + 1, "tool_calls": [c.name for c in reply.message.tool_calls],
                  "cost_usd": reply.usage.cost_usd})
    ]
    await w.record(Effects(messages=[reply.message.model_dump(mode="json")], events=events),
                   steps=1, spend_usd=reply.usage.cost_usd)
    return reply.message


def _outstanding(conversation: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    for i in range(len(conversation) - 1, -1, -1):
        message = conversation[i]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in conversation[i + 1:] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
    return []


async def _conclude(w: Worker, route: Routed | None, answer: str) -> Run:
    """A final answer counts only if the route's contract holds; otherwise the run fails."""
    entries = await ledger.for_run(w.rt.db, w.run.id)
    evidence = [
        EvidenceItem(tool=e.tool, status=e.status.value, fields=_key_fields(w, e.tool, e.result))
        for e in entries
    ]
    succeeded = {e.tool for e in entries if e.status is LedgerStatus.succeeded}
    required = route.branch.contract if route else w.rt.app.contract
    missing = [t for t in required if t not in succeeded]
    if missing:
        said = " ".join(answer.split())[:300]
        return await w.fail(
            "incomplete", missing=missing, evidence=evidence,
            detail=f"the run ended without {', '.join(missing)} having succeeded"
                   + (f"; the agent said: {said}" if said else ""),
        )
    return await w.finish(answer, evidence)


def _key_fields(w: Worker, tool_name: str, result: Any) -> dict[str, Any]:
    tool = w.rt.app.tool(tool_name)
    return tool.key_fields(result) if tool is not None else {}
