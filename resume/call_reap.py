"""Entry (the reaper's, for external calls): a lost lease makes a call ``unknown``.

An executing call whose lease ran out with no result may or may not have
run: it becomes ``unknown``, the requester is told and the key's webhook
gets ``call.unknown``. It is never retried here: its agent lists its unknown
calls (``GET /api/v1/calls?status=unknown``), reconciles each and reports
what it found. Each later reaper pass counts a recovery attempt; past
``rt.max_recovery_attempts`` with nobody settling it, the run fails
``outcome_unknown``, naming the call for a person to check.

Every move is a guarded UPDATE that re-checks what the pass read, so
concurrent reapers move each call once.
"""

from __future__ import annotations

import logging
from datetime import datetime

from resume import external, held, outbox
from resume.outcomes import CallsReaped
from resume.runtime import Runtime
from store import api_calls, api_runs, ledger, runs
from store.api_calls import RunChange
from store.api_records import ApiCall
from store.events import EventKind
from store.reasons import FailReason
from store.records import Run
from store.states import CallStatus, RunState
from store.transitions import Effects

log = logging.getLogger(__name__)

OUTCOME_UNKNOWN = FailReason.outcome_unknown
_OPEN_RUN = (RunState.running, RunState.suspended, RunState.halted)


async def reap_calls(rt: Runtime, now: datetime | None = None) -> CallsReaped:
    now = now or rt.now()
    out = CallsReaped()
    for call in await api_calls.lapsed(rt.db, now=now):
        moved = await _lapse(rt, call, now)
        if moved is not None:
            out.unknown.append(moved)
    for call in await api_calls.with_status(rt.db, CallStatus.unknown):
        if call.call_id in {c.call_id for c in out.unknown if c.run_id == call.run_id}:
            continue
        if call.recovery_attempts < rt.max_recovery_attempts:
            await api_calls.move(rt.db, call.run_id, call.call_id, expect=(CallStatus.unknown,),
                                 values={"recovery_attempts": call.recovery_attempts + 1},
                                 attempts=call.recovery_attempts,
                                 run=RunChange(expect=_OPEN_RUN), now=now)
            continue
        failed = await _fail(rt, call, now)
        if failed is not None:
            out.failed.append(failed)
    return out


async def _lapse(rt: Runtime, call: ApiCall, now: datetime) -> ApiCall | None:
    run = await runs.get(rt.db, call.run_id)
    detail = (f"{call.tool} was claimed for execution but no result came before its lease "
              f"ran out (idempotency key {external.idempotency_key(run.id, call.call_id)}); "
              "it may or may not have run. The agent must reconcile it; it is never retried.")
    data = {**external.call_data(call, run), "status": CallStatus.unknown.value}
    change = RunChange(fx=Effects(
        events=[(EventKind.lease_lost, {"call_id": call.call_id, "tool": call.tool,
                                "lease_until": call.lease_until.isoformat()
                                if call.lease_until else None})],
        outbox=[outbox.notice(run, "call_unknown", channel=rt.approvals_channel,
                              reason=OUTCOME_UNKNOWN, detail=detail),
                *external.webhook_rows(run, "call.unknown", data, at=now)],
    ))
    moved = await api_calls.move(rt.db, call.run_id, call.call_id,
                                 expect=(CallStatus.executing,), now=now, run=change,
                                 values={"status": CallStatus.unknown.value,
                                         "recovery_attempts": 0},
                                 lease_before=now)
    if moved is None:
        return None
    log.warning("run %s: call %s lost its lease; its outcome is unknown", run.id, call.call_id,
                extra={"action": "call_unknown", "run_id": run.id, "call_id": call.call_id})
    return moved[0]


async def _fail(rt: Runtime, call: ApiCall, now: datetime) -> Run | None:
    run = await runs.get(rt.db, call.run_id)
    if run.state not in _OPEN_RUN:
        return None
    entry = await ledger.get(rt.db, call.run_id, call.call_id)
    detail = (f"nobody settled {call.tool} within {rt.max_recovery_attempts} recovery "
              "attempts after its lease ran out")
    fx = held.failure_effects(run, OUTCOME_UNKNOWN, detail, [entry] if entry else [],
                               channel=rt.approvals_channel)
    final = {"run_id": run.id, "state": RunState.failed.value, "reason": OUTCOME_UNKNOWN,
             "answer": None}
    fx.outbox += external.webhook_rows(run, "run.finished", final, at=now)
    failed = await api_runs.move(
        rt.db, run.id, expect=_OPEN_RUN, now=now, fx=fx, action=OUTCOME_UNKNOWN,
        values={"state": RunState.failed.value, "halt_reason": OUTCOME_UNKNOWN,
                "pending_token": None, "heartbeat_at": None},
    )
    if failed is not None:
        log.error("run %s failed: call %s stayed unknown", run.id, call.call_id,
                  extra={"action": OUTCOME_UNKNOWN, "run_id": run.id})
    return failed
