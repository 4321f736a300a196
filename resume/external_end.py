"""Entries: an external run finishes (``POST .../finish``) or is cancelled (``.../cancel``).

A finish is ``answered`` only if every tool the agent says the run requires
has ``succeeded`` in the ledger; otherwise the run fails ``incomplete`` and
the notice names what did not succeed. Neither happens while a call is executing
or unknown (its outcome must be settled first): the run's UPDATE itself
checks that. A cancel fails the run ``cancelled``; its open card loses its
buttons and its undecided or unexecuted calls are cancelled with it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from resume import external, outbox
from resume.outbox import EvidenceItem
from resume.outcomes import ApiRefusal, ApiRefused, ExternalRun
from resume.runtime import Runtime
from store import api_calls, api_runs, ledger, runs
from store.api_records import ApiKey
from store.events import EventKind
from store.reasons import FailReason
from store.records import LedgerEntry, Run
from store.states import CallStatus, LedgerStatus, RunState
from store.transitions import CallChange, Effects

log = logging.getLogger(__name__)

INCOMPLETE = FailReason.incomplete
CANCELLED = FailReason.cancelled
_UNSETTLED = (CallStatus.pending, CallStatus.approved)


async def finish(
    rt: Runtime, key: ApiKey, run_id: str, *, answer: str, requires: Sequence[str],
) -> ExternalRun | ApiRefused:
    owned = await external.owned_run(rt, key, run_id)
    if isinstance(owned, ApiRefused):
        return owned
    run, _ = owned
    if run.state is not RunState.running:
        return _not_running(run)
    entries = await ledger.for_run(rt.db, run_id)
    succeeded = {e.tool for e in entries if e.status is LedgerStatus.succeeded}
    missing = [tool for tool in dict.fromkeys(requires) if tool not in succeeded]
    evidence = [_evidence(e) for e in entries]
    closing = await _close_calls(rt, run_id, _UNSETTLED)
    if missing:
        detail = f"the run ended without {', '.join(missing)} having succeeded"
        values = {"state": RunState.failed.value, "halt_reason": INCOMPLETE}
        fx = Effects(events=[(EventKind.failed, {"reason": INCOMPLETE, "missing": missing})],
                     outbox=[outbox.notice(run, "failed", channel=rt.approvals_channel,
                                           reason=INCOMPLETE, detail=detail, missing=missing,
                                           evidence=evidence)])
    else:
        values = {"state": RunState.answered.value, "answer": answer}
        fx = Effects(events=[(EventKind.answered, {"evidence": [e.tool for e in entries]})],
                     outbox=[outbox.notice(run, "answered", channel=rt.approvals_channel,
                                           answer=answer, evidence=evidence)])
    return await _end(rt, run, values, fx, closing, expect=(RunState.running,))


async def cancel(rt: Runtime, key: ApiKey, run_id: str) -> ExternalRun | ApiRefused:
    owned = await external.owned_run(rt, key, run_id)
    if isinstance(owned, ApiRefused):
        return owned
    run, _ = owned
    open_states = (RunState.running, RunState.suspended, RunState.halted)
    if run.state not in open_states:
        return _not_running(run)
    now = rt.now()
    rows = []
    if run.state is RunState.suspended and run.pending_token is not None:
        rows.append(outbox.card_update(run, run.pending_token, "cancelled", at=now,
                                         actor=key.name))
    rows.append(outbox.notice(run, "cancelled", channel=rt.approvals_channel,
                                reason=CANCELLED, detail=f"cancelled through API key {key.name}"))
    fx = Effects(events=[(EventKind.cancelled, {"by": f"api:{key.name}",
                                      "previous_state": run.state.value})], outbox=rows)
    closing = await _close_calls(rt, run_id, _UNSETTLED)
    values = {"state": RunState.failed.value, "halt_reason": CANCELLED}
    return await _end(rt, run, values, fx, closing, expect=open_states, in_flight_ok=True)


async def _close_calls(rt: Runtime, run_id: str, statuses: Sequence[CallStatus]) -> Effects:
    """Cancel the run's calls that were asked for but never ran, with the run's end."""
    calls = [c for c in await api_calls.for_run(rt.db, run_id) if c.status in statuses]
    return Effects(calls=[CallChange(c.call_id, {"status": CallStatus.cancelled.value})
                          for c in calls])


async def _end(
    rt: Runtime, run: Run, values: dict[str, Any], fx: Effects, closing: Effects, *,
    expect: tuple[RunState, ...], in_flight_ok: bool = False,
) -> ExternalRun | ApiRefused:
    now = rt.now()
    values = {**values, "pending_token": None, "heartbeat_at": None}
    final = {"run_id": run.id, "state": values["state"],
             "reason": values.get("halt_reason"), "answer": values.get("answer")}
    fx.calls += closing.calls
    fx.outbox += external.webhook_rows(run, "run.finished", final, at=now)
    ended = await api_runs.move(rt.db, run.id, expect=expect, values=values, now=now, fx=fx,
                                action=f"external_{values['state']}",
                                settled_calls=not in_flight_ok)
    if ended is None:
        current = await runs.get(rt.db, run.id)
        if current.state is RunState.running:
            return ApiRefused(ApiRefusal.calls_in_flight,
                              f"run {run.id} has calls executing or unknown; report their "
                              "results first", {"state": current.state.value})
        return _not_running(current)
    log.info("external run %s %s", run.id, ended.state.value,
             extra={"action": f"external_{ended.state.value}", "run_id": run.id})
    return ExternalRun(ended, created=False)


def _not_running(run: Run) -> ApiRefused:
    why = f" ({run.halt_reason})" if run.halt_reason else ""
    return ApiRefused(ApiRefusal.run_not_running, f"run {run.id} is {run.state.value}{why}",
                      {"state": run.state.value, "reason": run.halt_reason})


def _evidence(entry: LedgerEntry) -> EvidenceItem:
    doc = entry.result if isinstance(entry.result, dict) else {}
    fields = doc.get("evidence")
    return EvidenceItem(tool=entry.tool, status=entry.status.value,
                        fields=fields if isinstance(fields, dict) else {})
