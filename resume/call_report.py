"""Entries: an external agent reports what its call did, or keeps its lease alive.

``report`` settles the ledger under the execution claim (or, for a call that
went ``unknown``, with what the agent's reconcile found): the ledger row, the
call's status and an event commit together, and the card's thread is told
what ran. Reporting the same outcome again returns the call unchanged (a
client retrying a lost response is not an error); another outcome for a
settled call is refused. ``heartbeat`` pushes the lease forward while the
call is executing.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from resume import external, outbox
from resume.outbox import EvidenceItem
from resume.outcomes import ApiRefusal, ApiRefused, CallState
from resume.runtime import Runtime
from store import api_calls, errors, runs
from store.api_calls import RunChange
from store.api_records import ApiCall, ApiKey
from store.events import EventKind
from store.records import Run
from store.states import CallStatus, LedgerStatus
from store.transitions import Effects, LedgerCompletion

log = logging.getLogger(__name__)

_OPEN = (CallStatus.executing, CallStatus.unknown)


async def report(
    rt: Runtime, key: ApiKey, run_id: str, call_id: str, *,
    status: Literal["succeeded", "failed"], result: Any, evidence: dict[str, Any] | None,
) -> CallState | ApiRefused:
    found = await _call(rt, key, run_id, call_id)
    if isinstance(found, ApiRefused):
        return found
    run, call = found
    if call.status.value == status:
        return CallState(call, run)
    if call.status not in _OPEN:
        return ApiRefused(ApiRefusal.not_executing,
                          f"call {call_id} is {call.status.value}; there is no execution "
                          "to report on", {"status": call.status.value})
    now = rt.now()
    settled = CallStatus(status)
    item = EvidenceItem(tool=call.tool, status=status, fields=dict(evidence or {}))
    detail = (f"{call.tool} {status}" + (" (after its outcome was unknown)"
                                         if call.status is CallStatus.unknown else ""))
    change = RunChange(fx=Effects(
        events=[(EventKind.tool, {"call_id": call_id, "tool": call.tool, "status": status,
                          "key": external.idempotency_key(run_id, call_id), "external": True,
                          "was": call.status.value, "evidence": evidence})],
        ledger=[LedgerCompletion(call_id, LedgerStatus(status),
                                 {"result": result, "evidence": evidence})],
        outbox=[outbox.notice(run, "call_ran", channel=rt.approvals_channel, detail=detail,
                              evidence=[item])],
    ))
    try:
        moved = await api_calls.move(rt.db, run_id, call_id, expect=_OPEN, run=change, now=now,
                                     values={"status": settled.value, "lease_until": None})
    except (errors.PayloadTooLarge, errors.NotSerializable) as exc:
        return ApiRefused(ApiRefusal.invalid, str(exc))
    if moved is None:
        return await _raced(rt, run_id, call_id, status)
    log.info("run %s: call %s %s", run_id, call_id, status,
             extra={"action": "call_settled", "run_id": run_id, "call_id": call_id})
    return CallState(moved[0], moved[1])


async def heartbeat(rt: Runtime, key: ApiKey, run_id: str, call_id: str) -> CallState | ApiRefused:
    """Extend an executing call's lease by ``rt.execution_lease`` from now."""
    found = await _call(rt, key, run_id, call_id)
    if isinstance(found, ApiRefused):
        return found
    _, call = found
    now = rt.now()
    moved = await api_calls.move(
        rt.db, run_id, call_id, expect=(CallStatus.executing,), run=RunChange(), now=now,
        values={"lease_until": now + rt.execution_lease},
    )
    if moved is None:
        current = await api_calls.get(rt.db, run_id, call_id)
        status = current.status.value if current is not None else call.status.value
        return ApiRefused(ApiRefusal.not_executing,
                          f"call {call_id} is {status}; its lease cannot be extended",
                          {"status": status})
    return CallState(moved[0], moved[1])


async def _call(
    rt: Runtime, key: ApiKey, run_id: str, call_id: str
) -> tuple[Run, ApiCall] | ApiRefused:
    owned = await external.owned_run(rt, key, run_id)
    if isinstance(owned, ApiRefused):
        return owned
    call = await api_calls.get(rt.db, run_id, call_id)
    if call is None:
        return external.call_not_found(run_id, call_id)
    return owned[0], call


async def _raced(rt: Runtime, run_id: str, call_id: str, status: str) -> CallState | ApiRefused:
    """Someone settled the call between our read and our write: same outcome is fine."""
    current = await api_calls.get(rt.db, run_id, call_id)
    if current is None:
        return external.call_not_found(run_id, call_id)
    if current.status.value == status:
        return CallState(current, await runs.get(rt.db, run_id))
    return ApiRefused(ApiRefusal.not_executing,
                      f"call {call_id} is {current.status.value}; there is no execution "
                      "to report on", {"status": current.status.value})
