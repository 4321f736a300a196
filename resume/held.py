"""The run this process holds under its lease, and every write a drive makes to it.

``HeldRun`` is the only writer of a drive: steps, tool results, the ledger's
``started`` rows and their settlement, suspensions, heartbeats, and the ways a
run ends (halt, fail, finish). Every write carries the run's lease epoch: a
holder whose lease was taken over gets LeaseLost on its next write and stops,
so a presumed-dead process that wakes up writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from resume import evidence, outbox
from resume.messages import Message
from resume.outbox import DeclineData, EvidenceItem, FieldChange
from resume.outcomes import CallOutcome, DetailsChanged
from resume.runtime import Runtime
from resume.tools import Scope
from store import errors, ledger, outage, records, runs
from store.events import EventKind
from store.reasons import FailReason
from store.records import LedgerEntry, Run
from store.states import LedgerStatus, RunState
from store.transitions import Effects, LedgerCompletion

log = logging.getLogger(__name__)

Events = Sequence[tuple[str, dict[str, Any]]]
OutboxRows = list[tuple[str, dict[str, Any]]]


@dataclass
class HeldRun:
    """The run this process holds at ``run.lease_epoch``, with its conversation and scope.

    Each write returns the run as stored after it (also kept in ``run``), or
    raises LeaseLost having written nothing.
    """

    rt: Runtime
    run: Run
    conversation: list[Message]
    scope: Scope
    #: What happened to each tool call settled during this drive.
    settled: dict[str, CallOutcome] = field(default_factory=dict)
    _mark: float = field(default_factory=time.monotonic)

    @classmethod
    async def load(cls, rt: Runtime, run: Run) -> HeldRun:
        """The held run with its stored conversation and the requester's scope as it is now."""
        stored = await runs.conversation(rt.db, run.id)
        return cls(rt, run, [Message.model_validate(m) for m in stored],
                   scope=await rt.app.scope(run.user_id))

    def keep_alive(self) -> AbstractAsyncContextManager[None]:
        """Heartbeat the lease while the drive works (long tool or model calls included)."""
        return keep_alive(self.rt, self.run)

    @property
    def epoch(self) -> int:
        return self.run.lease_epoch

    def elapsed_ms(self) -> int:
        """Active time since the last write; the pause itself is not charged."""
        now = time.monotonic()
        spent, self._mark = int((now - self._mark) * 1000), now
        return spent

    @property
    def channel(self) -> str | None:
        return self.rt.approvals_channel

    async def record(self, fx: Effects, **counters: Any) -> Run:
        """A step: ``fx`` (messages, events, outbox, ledger settlements) and budget counters."""
        self.run = await runs.record_step(
            self.rt.db, self.run.id, self.epoch, now=self.rt.now(), fx=fx,
            elapsed_ms=self.elapsed_ms(), **counters,
        )
        self.conversation.extend(Message.model_validate(m) for m in fx.messages)
        return self.run

    async def _record_held(self, fx: Effects, call_id: str, **counters: Any) -> Run:
        """Commit a tool's result, holding it through a short database outage.

        Only this process knows the result. A retry first asks the ledger whether
        the failed attempt committed after all (its answer lost with the
        connection), so the result is never written twice. Past half the orphan
        window a reaper may take the run over: give way to it; it reconciles.
        """
        elapsed, epoch = self.elapsed_ms(), self.epoch

        async def write(attempt: int) -> Run:
            entry = await ledger.get(self.rt.db, self.run.id, call_id) if attempt else None
            if entry is not None and entry.status is not LedgerStatus.started:
                landed = await runs.get(self.rt.db, self.run.id)
                if landed.state is not RunState.running or landed.lease_epoch != epoch:
                    # Settled by a process that took the run over, not by us: stand down.
                    raise errors.LeaseLost(self.run.id, epoch)
                return landed
            return await runs.record_step(self.rt.db, self.run.id, epoch,
                                          now=self.rt.now(), fx=fx, elapsed_ms=elapsed,
                                          **counters)

        self.run = await outage.hold(write, seconds=self.rt.orphan_after.total_seconds() / 2,
                                     what=f"recording call {call_id}", run_id=self.run.id)
        self.conversation.extend(Message.model_validate(m) for m in fx.messages)
        return self.run

    async def tool_result(
        self, call_id: str, tool: str, content: Any, *, events: Events,
        rows: OutboxRows | None = None,
        settles: LedgerCompletion | None = None, counts_as_call: bool = False,
        hold: bool = False,
    ) -> Run:
        """Append a tool-result message (what the model will see) with its effects.

        ``hold``: the result of a call that ran here; see :meth:`_record_held`.
        """
        text = content if isinstance(content, str) else _result_text(content)
        message = Message.tool_result(call_id, tool, text).model_dump(mode="json")
        fx = Effects(messages=[message], events=list(events), outbox=rows or [],
                     ledger=[settles] if settles else [])
        calls = 1 if counts_as_call else 0
        if hold and settles is not None:
            return await self._record_held(fx, settles.call_id, tool_calls=calls)
        return await self.record(fx, tool_calls=calls)

    async def start_call(self, call_id: str, tool: str, args: dict[str, Any],
                         idempotency_key: str) -> LedgerEntry:
        """The ledger's ``started`` row, committed before the tool runs (or the existing one)."""
        return await ledger.start(self.rt.db, self.run.id, self.epoch, call_id=call_id,
                                  tool=tool, args=args, idempotency_key=idempotency_key,
                                  now=self.rt.now())

    async def suspend(
        self, call_id: str, suspension: runs.Suspension, *, event: dict[str, Any],
        rows: OutboxRows, changes: list[FieldChange] | None,
    ) -> Run:
        """running -> suspended; with ``changes`` a re-ask whose details changed."""
        kind = EventKind.resuspended if changes else EventKind.suspended
        try:
            self.run = await runs.suspend(
                self.rt.db, self.run.id, self.epoch, suspension, now=self.rt.now(),
                elapsed_ms=self.elapsed_ms(), fx=Effects(events=[(kind, event)], outbox=rows),
            )
        except (errors.PayloadTooLarge, errors.NotSerializable) as exc:
            return await self.fail(FailReason.preview_too_large, detail=str(exc))
        if changes is not None:
            self.settled[call_id] = DetailsChanged(self.run, changes)
        return self.run

    async def halt(self, reason: str, *, detail: str | None = None,
                   rows: OutboxRows | None = None) -> Run:
        """running -> halted(reason); the requester is told how to continue."""
        done = await evidence.of_run(self.rt.db, self.rt.app, self.run.id)
        notice = outbox.notice(self.run, "halted", channel=self.channel, reason=reason,
                               detail=detail, evidence=done)
        fx = Effects(events=[(EventKind.halted, {"reason": reason, "detail": detail})],
                     outbox=[*(rows or []), notice])
        self.run = await runs.halt(self.rt.db, self.run.id, self.epoch, reason,
                                   now=self.rt.now(), fx=fx, elapsed_ms=self.elapsed_ms())
        return self.run

    async def fail(self, reason: str, *, detail: str | None = None,
                   missing: list[str] | None = None,
                   done: list[EvidenceItem] | None = None,
                   declined: DeclineData | None = None) -> Run:
        """running -> failed(reason), with a failure notice saying what did happen."""
        if done is None:
            done = await evidence.of_run(self.rt.db, self.rt.app, self.run.id)
        notice = outbox.notice(self.run, "failed", channel=self.channel, reason=reason,
                               detail=detail, missing=missing, evidence=done,
                               declined=declined)
        data = {"reason": reason, "detail": detail, "missing": missing or []}
        fx = Effects(events=[(EventKind.failed, data)], outbox=[notice])
        return await self.fail_with(reason, fx)

    async def fail_naming(self, reason: str, detail: str, unknown: Sequence[LedgerEntry], *,
                          events: Events = ()) -> Run:
        """running -> failed(reason), naming (and closing as ``unknown``) each of ``unknown``."""
        done = await evidence.of_run(self.rt.db, self.rt.app, self.run.id)
        return await self.fail_with(reason, failure_effects(
            self.run, reason, detail, unknown, channel=self.channel, events=events, done=done))

    async def fail_with(self, reason: str, fx: Effects) -> Run:
        """running -> failed(reason), writing ``fx`` (its event and notice) with it."""
        self.run = await runs.fail(self.rt.db, self.run.id, self.epoch, reason,
                                   now=self.rt.now(), fx=fx, elapsed_ms=self.elapsed_ms())
        return self.run

    async def finish(self, answer: str, evidence: list[EvidenceItem]) -> Run:
        """running -> answered, with the evidence (which tools ran) in the notice."""
        notice = outbox.notice(self.run, "answered", channel=self.channel, answer=answer,
                               evidence=evidence)
        data = {"evidence": [e.model_dump() for e in evidence]}
        fx = Effects(events=[(EventKind.answered, data)], outbox=[notice])
        self.run = await runs.finish(self.rt.db, self.run.id, self.epoch, answer,
                                     now=self.rt.now(), fx=fx, elapsed_ms=self.elapsed_ms())
        return self.run


def _result_text(result: Any) -> str:
    try:
        text = json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(result)
    limit = records.MAX_MESSAGE_BYTES // 2
    if len(text.encode()) > limit:
        # The tool's write already happened; keep the record, shorten what the model reads.
        text = text.encode()[:limit].decode(errors="ignore") + " …[truncated]"
    return text


def ledger_result(result: Any) -> Any:
    """The result as the ledger can store it (an oversized one becomes a marker)."""
    try:
        records.dumps(result, what="tool result")
    except errors.StoreError as exc:
        return {"unstored_result": str(exc), "summary": _result_text(result)[:2000]}
    return result


def unknown_call(entry: LedgerEntry) -> str:
    """One call whose write may or may not have happened: the tool, its arguments, its key."""
    args = ", ".join(f"{k} {_result_text(v).strip(chr(34))}" for k, v in entry.args.items())
    return (f"{entry.tool} may or may not have run" + (f" with {args}" if args else "")
            + f" (idempotency key {entry.idempotency_key})")


def failure_effects(
    run: Run, reason: str, detail: str, unknown: Sequence[LedgerEntry], *,
    channel: str | None, events: Events = (), done: list[EvidenceItem] | None = None,
    **data: Any,
) -> Effects:
    """A failure that names each call still ``started``, for a person to check.

    Nobody will reconcile those calls once the run has failed, so the ledger
    records their outcome as ``unknown`` in the same transaction.
    """
    if unknown:
        lead = f"{detail.rstrip('.')}. " if detail else ""
        detail = lead + "; ".join(unknown_call(e) for e in unknown)
        detail += "; check before asking again."
    named = [{"call_id": e.call_id, "tool": e.tool, "args": e.args,
              "idempotency_key": e.idempotency_key} for e in unknown]
    return Effects(
        events=[*events, (EventKind.failed, {"reason": reason, "detail": detail, **data,
                                             "unknown_calls": named})],
        outbox=[outbox.notice(run, "failed", channel=channel, reason=reason, detail=detail,
                              evidence=done)],
        ledger=[LedgerCompletion(e.call_id, LedgerStatus.unknown, None) for e in unknown],
    )


@asynccontextmanager
async def keep_alive(rt: Runtime, run: Run) -> AsyncIterator[None]:
    """Heartbeat the lease while a run is worked on (long tool or model calls included)."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(rt.heartbeat_every)
            try:
                if not await runs.heartbeat(rt.db, run.id, run.lease_epoch, now=rt.now()):
                    return
            except errors.DatabaseUnavailable:
                log.warning("heartbeat for run %s failed; will retry", run.id,
                            extra={"action": "heartbeat", "run_id": run.id})

    task = asyncio.create_task(beat(), name=f"heartbeat-{run.id}")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
