"""One gated call, the whole round: ask, wait, re-check, claim, execute under the lease, report.

The server holds the guarantees (one claim winner, the digest check, the ledger); this
module only walks a call through them and turns each answer into the next request or an
exception. Asking again with the same ``call_id`` joins the round where the server has
it: a call that already succeeded returns its recorded result and is never run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from signoff_client import errors
from signoff_client.context import CallContext, _current_call
from signoff_client.models import Call, CallStatus, Grant, JsonObject, guard_body
from signoff_client.tools import Guard, Tool, resolve
from signoff_client.transport import MAX_WAIT, Api

log = logging.getLogger("signoff_client")

PermittedFn = Callable[[], bool | Awaitable[bool]]

#: How long to wait before looking again at a call someone else is executing.
EXECUTING_RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Ask:
    """What the agent asks for, as posted to ``/runs/{run}/calls``."""

    run_id: str
    call_id: str
    tool: Tool
    args: JsonObject
    approvers: list[str] | None = None
    ttl_minutes: float | None = None
    spend_usd: float | None = None
    permitted: PermittedFn | None = None


@dataclass(frozen=True)
class _Done:
    value: Any


class Round:
    def __init__(self, api: Api, ask: Ask) -> None:
        self.api, self.ask = api, ask
        self.path = f"/runs/{ask.run_id}/calls/{ask.call_id}"
        #: Set once the server reported the approved details changed (a diff card went out).
        self.changed = False

    async def perform(self, *, rejoin: bool = False, pause: bool = False) -> Any:
        """The round to its end; its result, or the exception that says why nothing ran.

        ``rejoin``: the call was asked for earlier (by a framework that pauses on its own),
        so look it up instead of asking. ``pause``: raise AwaitingDecision instead of
        waiting while it is pending (a changed preview puts it back there), so the
        framework can pause again.
        """
        call = await (self._get() if rejoin else self._request())
        while True:
            if pause and call.status is CallStatus.pending:
                raise errors.AwaitingDecision(self.ask.call_id, changed=self.changed)
            step = await self._next(call)
            if isinstance(step, _Done):
                return step.value
            call = step

    async def _next(self, call: Call) -> Call | _Done:
        status = call.status
        if status is CallStatus.pending:
            return await self._get(wait=MAX_WAIT)
        if status is CallStatus.executing:
            await asyncio.sleep(EXECUTING_RECHECK_SECONDS)
            return await self._get(wait=MAX_WAIT)
        if status is CallStatus.approved:
            return await self._claim()
        if status is CallStatus.succeeded:
            return _Done(await recorded_result(self.api, self.ask.run_id, call))
        if status is CallStatus.unknown:
            return _Done(await settle_unknown(self.api, self.ask.run_id, call, self.ask.tool,
                                              self.ask.args))
        raise self._refusal(call)

    def _refusal(self, call: Call) -> Exception:
        decision, call_id = call.decision, self.ask.call_id
        if call.status is CallStatus.declined:
            return errors.Declined(call_id, decision.reason if decision else None,
                                   decision.by if decision else None, changed=self.changed)
        if call.status is CallStatus.expired:
            return errors.Expired(call_id)
        if call.status is CallStatus.cancelled:
            return errors.Cancelled(call_id)
        if call.status is CallStatus.blocked:
            return errors.Blocked(call_id, call.code or "blocked",
                                  call.message or (decision.reason if decision else "") or "")
        return errors.CallFailed(call_id, call.result)

    async def request(self) -> Call:
        """Ask for approval (or get the call back: the same ``call_id`` is the same call)."""
        return await self._request()

    async def status(self, wait: int = 0) -> Call:
        """The call as it stands, after waiting up to ``wait`` seconds for it to change."""
        return await self._get(wait=wait)

    async def _request(self) -> Call:
        ask = self.ask
        body: JsonObject = {
            "call_id": ask.call_id, "tool": ask.tool.name, "args": ask.args,
            "preview": (await ask.tool.render(ask.args)).model_dump(mode="json"),
        }
        if ask.approvers:
            body["approvers"] = {"users": ask.approvers}
        if ask.ttl_minutes is not None:
            body["ttl_minutes"] = ask.ttl_minutes
        if ask.spend_usd is not None:
            body["spend_usd"] = ask.spend_usd
        try:
            _, answer = await self.api.request("POST", f"/runs/{ask.run_id}/calls", json=body)
        except errors.ApiError as exc:
            if exc.code != "idempotency_conflict":
                raise
            # Asked before with a preview rendered then: this is that call. The execution
            # claim compares the preview rendered now with the one the approver saw.
            call = await self._get()
            if call.tool not in (None, ask.tool.name):
                raise
            return call
        return Call.model_validate(answer)

    async def _get(self, wait: int = 0) -> Call:
        return await call_status(self.api, self.ask.run_id, self.ask.call_id, wait=wait)

    async def _claim(self) -> Call | _Done:
        """Re-render, re-check, then ask for the one execution; run it if this caller won."""
        ask = self.ask
        preview = await ask.tool.render(ask.args)
        guard = await ask.tool.check(ask.args)
        permitted = await resolve(ask.permitted()) if ask.permitted is not None else True
        body = {"preview": preview.model_dump(mode="json"),
                "guard": guard_body(guard.ok, guard.code, guard.message),
                "permitted": permitted}
        try:
            _, answer = await self.api.request("POST", f"{self.path}/execute", json=body)
        except errors.ApiError as exc:
            return await self._claim_refused(exc, guard)
        return _Done(await self._execute(Grant.model_validate(answer)))

    async def _claim_refused(self, exc: errors.ApiError, guard: Guard) -> Call:
        if exc.code == "blocked":
            raise errors.Blocked(self.ask.call_id, guard.code or "blocked",
                                 guard.message or exc.detail) from None
        if exc.code == "no_longer_permitted":
            raise errors.NoLongerPermitted(self.ask.call_id) from None
        if exc.code == "changed":
            self.changed = True
            log.info("approved details changed; a fresh decision is needed",
                     extra={"action": "changed", "call_id": self.ask.call_id})
        elif exc.status != 409:
            raise exc
        # changed: pending again; already_executing/executed or a settled status: look it up.
        call = await self._get()
        if call.status is CallStatus.approved:
            raise exc
        return call

    async def _execute(self, grant: Grant) -> Any:
        ask = self.ask
        token = _current_call.set(CallContext(ask.run_id, ask.call_id, grant.idempotency_key))
        beating = asyncio.create_task(self._heartbeat(grant.lease_seconds))
        try:
            value = await ask.tool.run(ask.args)
        except Exception as exc:
            await self._report("failed", {"error": type(exc).__name__, "message": str(exc)},
                               value=None)
            raise
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
            _current_call.reset(token)
        result = value if isinstance(value, dict) else {"value": value}
        await self._report("succeeded", result, value=value)
        return value

    async def _heartbeat(self, lease_seconds: float) -> None:
        interval = max(0.2, lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.api.request("POST", f"{self.path}/heartbeat", json={})
            except errors.SignoffError as exc:
                log.warning("heartbeat refused; the lease may be lost",
                            extra={"action": "heartbeat", "call_id": self.ask.call_id,
                                   "problem": str(exc)})
                return

    async def _report(self, status: str, result: JsonObject, *, value: Any) -> None:
        body: JsonObject = {"status": status, "result": result}
        evidence = self.ask.tool.evidence_of(result) if status == "succeeded" else None
        if evidence is not None:
            body["evidence"] = evidence
        try:
            await self.api.request("POST", f"{self.path}/result", json=body)
        except errors.SignoffError as exc:
            raise errors.ResultNotRecorded(self.ask.call_id, value) from exc


async def settle_unknown(api: Api, run_id: str, call: Call, tool: Tool,
                         args: JsonObject) -> Any:
    """Ask the tool's reconcile what happened, and settle the call with what it found.

    Returns the result when the write is found done; raises CallFailed when it is found
    not done (the call is settled failed, never run again), OutcomeUnknown when nobody
    can tell (the call stays unknown for a person to look at).
    """
    key = call.idempotency_key or ledger_key(run_id, call.call_id)
    found = await tool.find_out(key, args)
    path = f"/runs/{run_id}/calls/{call.call_id}/result"
    if found.outcome == "done":
        result = found.result if isinstance(found.result, dict) else {"value": found.result}
        await api.request("POST", path, json={"status": "succeeded", "result": result,
                                              "evidence": {"reconciled": True}})
        return found.result
    if found.outcome == "not_done":
        await api.request("POST", path, json={"status": "failed",
                                              "result": {"reconciled": "not_done"}})
        raise errors.CallFailed(call.call_id, {"reconciled": "not_done"})
    raise errors.OutcomeUnknown(call.call_id, key)


def ledger_key(run_id: str, call_id: str) -> str:
    """The idempotency key signoff's ledger gives a call (when the server did not say it)."""
    return f"{run_id}:{call_id}"


async def recorded_result(api: Api, run_id: str, call: Call) -> Any:
    """What a succeeded call returned: from the call, or else from the run's evidence."""
    if "result" in call.model_fields_set:
        return call.result
    _, run = await api.request("GET", f"/runs/{run_id}")
    for item in (run or {}).get("evidence", []):
        if isinstance(item, dict) and item.get("call_id") == call.call_id:
            return item.get("result")
    return None


async def call_status(api: Api, run_id: str, call_id: str, *, wait: int = 0) -> Call:
    """The call as it stands, after one long-poll of up to ``wait`` seconds while pending."""
    _, answer = await api.request("GET", f"/runs/{run_id}/calls/{call_id}",
                                  params={"wait": wait})
    return Call.model_validate(answer)


async def decision(api: Api, run_id: str, call_id: str, *, wait: bool = True) -> Call:
    """The call once someone decided (or, with ``wait=False``, as it stands now)."""
    while True:
        call = await call_status(api, run_id, call_id, wait=MAX_WAIT if wait else 0)
        if call.status is not CallStatus.pending or not wait:
            return call
