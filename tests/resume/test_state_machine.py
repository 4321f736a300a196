"""A hypothesis state machine over the real store: start (some runs on budgets tight enough
to halt), approve, decline, expire, crash and recover (some runs crash again in every
recovery until the reaper gives up on them), continue and cancel quotes runs in any order,
on SQLite and PostgreSQL.

After every step, for every run the machine started:

- at most one CRM send per approved tool call, and no more sends than approvals;
- budget consumption (step, spend_usd, tool_calls, elapsed_ms) never decreases;
- answered and failed runs stay exactly as they ended;
- a suspended run has exactly one undecided approval, the one whose token is
  ``runs.pending_token``; every other token of the run is refused; a halted,
  answered or failed run keeps no ``pending_token``;
- every change to a state other than ``running`` appended an event;
- an answered or failed run has no ``started`` ledger row (each unknown outcome was
  reconciled or recorded ``unknown``), and a run failed ``recovery_exhausted`` names
  every call it left unknown, tool and arguments, in its failure notice.

The test also checks that the machine gets somewhere: a fixed walk through its own
rules, invariants checked after every step, reaches a budget halt and
``recovery_exhausted``. It is asserted on that walk, not on the random examples:
25 of them now and then (about one test run in twenty) miss ``recovery_exhausted``.

A "crash" is a claim whose drive never ran (the process died right after
the click); time moves by assignment to the runtime's clock and by writing
heartbeats into the past, never by sleeping. Hypothesis machines are
synchronous, so each machine drives the async code through its own event
loop (``asyncio.Runner``). Each example starts on an emptied database: the
sweeps (expiry, recovery) act on every run they find, so runs an earlier example
left suspended or orphaned would be expired, taken over or crashed on by this
one. Its steps would then depend on the examples before it: a failure would not
replay (hypothesis reports it ``Flaky``) and each example would cost more than
the one before, pushing the test towards pytest's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import func, select

from examples import crm as crm_tables
from examples import quotes
from examples.crm import CRM, Pricing
from resume import cancel, decide, expire, grant, outcomes, reap
from resume.budget import Limits
from resume.messages import Message, ToolSpec
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from store import claims, engine, events, ledger, outbox, runs, schema
from store.reasons import FailReason
from store.records import Run
from store.states import LedgerStatus, RunState
from tests import journeys
from tests.quotes_harness import ASK, quotes_world

USER = "U_REP"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(seconds=1)
#: Takeovers of one run before a reaper fails it: small, so ``recovery_exhausted`` is reached.
RECOVERIES = 1
TERMINAL = (RunState.answered, RunState.failed)
#: Budgets that halt a quotes run on the way: after lookup, after draft, after the send
#: (before the final answer), and at the send itself (the approval is then kept).
TIGHT = (Limits(max_steps=1), Limits(max_steps=2), Limits(max_steps=3),
         Limits(max_tool_calls=2))
MACHINE = settings(max_examples=25, stateful_step_count=15, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow])


class Clock:
    """The runtime's clock: moves forward by assignment only."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance_to(self, at: datetime) -> None:
        self.at = max(self.at, at)


@dataclass
class Seen:
    """What the invariants last saw of a run."""

    state: RunState
    event_seq: int
    consumed: tuple[int, float, int, int]
    ended: Run | None = None


def _consumed(run: Run) -> tuple[int, float, int, int]:
    return (run.step, run.spend_usd, run.tool_calls, run.elapsed_ms)


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


class CrashingSends(CRM):
    """The CRM as a process that dies on its way to send: nothing is written."""

    async def send(self, quote_id: str, pricing: Pricing, key: str) -> dict[str, Any]:
        raise Crash


def _crash_at_model(messages_: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
    raise Crash


class QuotesRuns(RuleBasedStateMachine):
    """The machine; :func:`machine_for` binds it to a database."""

    url = ""
    started = Bundle("started")
    #: Halt and failure reasons any machine of this class reached (the test checks coverage).
    reached: ClassVar[set[str]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.Runner()
        self.db = engine.connect(self.url)
        self.clock = Clock(T0)
        world = self.loop.run(quotes_world(self.db, clock=self.clock))
        self.loop.run(_empty(self.db))
        self.rt, self.crm = world.rt, world.crm
        #: A second process: it takes over what the first left behind.
        self.reaper = self._runtime("proc_reaper", self.rt.app)
        #: Reapers that take a run over and die: at its next model call, or mid-send.
        self.doomed = {
            "model": self._runtime("proc_doomed_model", quotes.build(
                self.crm, ScriptedModel(_crash_at_model))),
            "send": self._runtime("proc_doomed_send", quotes.build(CrashingSends(self.db))),
        }
        self.seen: dict[str, Seen] = {}

    def teardown(self) -> None:
        self.loop.run(self.db.dispose())
        self.loop.close()

    def _runtime(self, owner_id: str, app: Any) -> Runtime:
        return Runtime(db=self.db, app=app, owner_id=owner_id, clock=self.clock,
                       max_recovery_attempts=RECOVERIES)

    def run(self, coro: Any) -> Any:
        return self.loop.run(coro)

    def get(self, run_id: str) -> Run:
        result: Run = self.run(runs.get(self.db, run_id))
        return result

    # -- rules -------------------------------------------------------------------

    @rule(target=started)
    def start(self) -> str:
        run: Run = self.run(journeys.start(self.rt, USER, ASK))
        assert run.state is RunState.suspended, run.halt_reason
        self.seen[run.id] = Seen(run.state, run.event_seq, _consumed(run))
        return run.id

    @rule(target=started, limits=st.sampled_from(TIGHT))
    def start_on_a_tight_budget(self, limits: Limits) -> str:
        tight = Runtime(db=self.db, app=quotes.build(self.crm, limits=limits),
                        owner_id=self.rt.owner_id, clock=self.clock)
        run: Run = self.run(journeys.start(tight, USER, ASK))
        if limits.max_steps < 3:
            assert (run.state, run.halt_reason) == (RunState.halted, "budget:steps")
        else:
            assert run.state is RunState.suspended, run.halt_reason
        self.seen[run.id] = Seen(run.state, run.event_seq, _consumed(run))
        return run.id

    @rule(run_id=started)
    def approve(self, run_id: str) -> None:
        self._decide(run_id, "approve")

    @rule(run_id=started)
    def decline(self, run_id: str) -> None:
        self._decide(run_id, "decline")

    def _decide(self, run_id: str, decision: outcomes.Decision) -> None:
        run = self.get(run_id)
        result = self.run(journeys.resume_after_confirmation(
            self.rt, run.pending_token or "tok_none", decision, USER))
        if run.state is RunState.suspended:
            assert not isinstance(result, outcomes.Refusal), result
        else:
            assert isinstance(result, outcomes.Refusal), (run.state, result)

    @rule(run_id=started)
    def click_an_old_card(self, run_id: str) -> None:
        """Every token of the run but the pending one is refused and changes nothing."""
        run = self.get(run_id)
        for approval in self.run(claims.approvals_of(self.db, run_id)):
            if approval.token == run.pending_token and run.state is RunState.suspended:
                continue
            refused = self.run(decide.decide(self.rt, approval.token, "approve", USER))
            assert isinstance(refused, outcomes.Refusal), (approval.token, run.state)
        after = self.get(run_id)
        assert (after.state, after.event_seq) == (run.state, run.event_seq)

    @rule(run_id=started)
    def expire(self, run_id: str) -> None:
        run = self.get(run_id)
        if run.expires_at is not None:
            self.clock.advance_to(run.expires_at)
        expired = self.run(expire.expire_suspended(self.rt, now=self.clock.at))
        if run.state is RunState.suspended and run.expires_at is not None:
            assert run_id in [r.id for r in expired]

    @rule(run_id=started)
    def click_then_crash(self, run_id: str) -> None:
        """The click is claimed, then the process dies before it does anything else."""
        run = self.get(run_id)
        claimed = self.run(decide.decide(self.rt, run.pending_token or "tok_none",
                                               "approve", USER))
        assert isinstance(claimed, outcomes.Claimed) == (run.state is RunState.suspended)

    @rule()
    def recover(self) -> None:
        """Every running run's heartbeat goes stale; another process reaps."""
        stale = self.clock.at - self.rt.orphan_after - TICK
        for run_id in self.seen:
            run = self.get(run_id)
            if run.state is RunState.running:
                assert self.run(runs.heartbeat(self.db, run_id, run.lease_epoch, now=stale))
        self.run(reap.recover_orphans(self.reaper, now=self.clock.at))
        for run_id in self.seen:
            assert self.get(run_id).state is not RunState.running, "an orphan was left"

    @rule(run_id=started, where=st.sampled_from(["model", "send"]))
    def crash_in_recovery(self, run_id: str, where: str) -> None:
        """The run is clicked (or continued) and the process dies; so does the reaper that
        takes it over, at its next model call or mid-send."""
        self._crash(run_id, where, times=1)

    @rule(run_id=started, where=st.sampled_from(["model", "send"]))
    def crash_in_every_recovery(self, run_id: str, where: str) -> None:
        """As above, and every later reaper dies the same way until one gives up on the run."""
        self._crash(run_id, where, times=RECOVERIES + 1)

    def _crash(self, run_id: str, where: str, *, times: int) -> None:
        run = self.get(run_id)
        if run.state is RunState.suspended:
            self.run(decide.decide(self.rt, run.pending_token or "tok_none",
                                         "approve", USER))
        elif run.state is RunState.halted:
            self.run(grant.grant_continue(self.rt, run_id, USER))
        doomed = self.doomed[where]
        for _ in range(times):
            run = self.get(run_id)
            if run.state is not RunState.running:
                return
            stale = self.clock.at - self.rt.orphan_after - TICK
            assert self.run(runs.heartbeat(self.db, run_id, run.lease_epoch, now=stale))
            try:
                report = self.run(reap.recover_orphans(doomed, now=self.clock.at))
            except Crash:
                continue  # this run's reaper died, or another orphan's did
            if run.recovery_attempts >= doomed.max_recovery_attempts:
                assert run_id in [r.id for r in report.exhausted], run.recovery_attempts
        # Past ``RECOVERIES`` takeovers a reaper fails the run rather than take it again.
        assert times <= RECOVERIES or self.get(run_id).state is not RunState.running

    @rule(run_id=started)
    def continue_(self, run_id: str) -> None:
        run = self.get(run_id)
        result = self.run(journeys.continue_run(self.rt, run_id, USER))
        continued = isinstance(result, outcomes.Continued)
        assert continued == (run.state is RunState.halted), (run.state, result)

    @rule(run_id=started)
    def cancel(self, run_id: str) -> None:
        run = self.get(run_id)
        result = self.run(cancel.cancel(self.rt, run_id, USER))
        cancellable = run.state in (RunState.suspended, RunState.halted)
        assert isinstance(result, outcomes.Cancelled) == cancellable, (run.state, result)

    # -- invariants --------------------------------------------------------------

    @invariant()
    def every_run_holds(self) -> None:
        for run_id, seen in self.seen.items():
            run = self.get(run_id)
            self._sends(run)
            self._budget(run, seen)
            self._terminal(run, seen)
            self._one_live_token(run)
            self._events(run, seen)
            self._unknown_outcomes(run)
            seen.state, seen.event_seq, seen.consumed = run.state, run.event_seq, _consumed(run)
            if run.state in TERMINAL and seen.ended is None:
                seen.ended = run
            if run.halt_reason is not None:
                type(self).reached.add(run.halt_reason.partition(":")[0])

    def _sends(self, run: Run) -> None:
        calls = [e for e in self.run(ledger.for_run(self.db, run.id))
                 if e.tool == "send_quote"]
        keys = [e.idempotency_key for e in calls]
        sent = self.run(_sends_by_key(self.db, keys))
        assert all(n <= 1 for n in sent.values()), f"{run.id}: a call sent twice: {sent}"
        decisions = self.run(events.for_run(self.db, run.id, kind="decision"))
        approved = sum(1 for e in decisions if e.data["decision"] == "approve")
        assert sum(sent.values()) <= approved, f"{run.id}: {sent} sends, {approved} approvals"

    def _budget(self, run: Run, seen: Seen) -> None:
        now = _consumed(run)
        assert all(a >= b for a, b in zip(now, seen.consumed, strict=True)), (
            f"{run.id}: budget went back from {seen.consumed} to {now}")

    def _terminal(self, run: Run, seen: Seen) -> None:
        if seen.ended is not None:
            ended = seen.ended
            assert (run.state, run.halt_reason, run.event_seq, run.answer) == (
                ended.state, ended.halt_reason, ended.event_seq, ended.answer), (
                f"{run.id} left {ended.state.value}")

    def _one_live_token(self, run: Run) -> None:
        if run.state is not RunState.suspended:
            if run.state is not RunState.running:  # a claimed run still names its card
                assert run.pending_token is None, f"{run.id} is {run.state.value} with a token"
            return
        assert run.pending_token and run.expires_at is not None
        undecided = [a.token for a in self.run(claims.approvals_of(self.db, run.id))
                     if a.decided_at is None and a.token == run.pending_token]
        assert undecided == [run.pending_token], f"{run.id}: live tokens {undecided}"

    def _events(self, run: Run, seen: Seen) -> None:
        if run.state is not seen.state and run.state is not RunState.running:
            assert run.event_seq > seen.event_seq, (
                f"{run.id}: {seen.state.value} -> {run.state.value} without an event")


    def _unknown_outcomes(self, run: Run) -> None:
        if run.state not in TERMINAL:
            return
        entries = self.run(ledger.for_run(self.db, run.id))
        assert not [e.call_id for e in entries if e.status is LedgerStatus.started], (
            f"{run.id} is {run.state.value} with a started ledger row")
        if run.halt_reason != FailReason.recovery_exhausted:
            return
        notice = [r.payload for r in self.run(outbox.for_run(self.db, run.id))
                  if r.kind == "run_notice" and r.payload["event"] == "failed"][-1]
        for e in entries:
            if e.status is LedgerStatus.unknown:
                named = [f"{k} {v}" for k, v in e.args.items()]
                assert e.tool in notice["detail"] and all(n in notice["detail"] for n in named), (
                    f"{run.id}: the notice does not name {e.tool} {e.args}")


async def _empty(db: engine.Database) -> None:
    """Delete what earlier examples left: every row of signoff's tables, every quote."""
    async with db.write() as conn:
        for table in (crm_tables.quotes, *reversed(schema.metadata.sorted_tables)):
            await conn.execute(table.delete())


def machine_for(url: str) -> type[QuotesRuns]:
    return type("QuotesRunsOn", (QuotesRuns,), {"url": url, "reached": set()})


async def _sends_by_key(db: engine.Database, keys: list[str]) -> dict[str, int]:
    if not keys:
        return {}
    quotes = crm_tables.quotes
    stmt = (select(quotes.c.send_key, func.count()).where(quotes.c.send_key.in_(keys))
            .group_by(quotes.c.send_key))
    async with db.read() as conn:
        return {key: int(n) for key, n in (await conn.execute(stmt)).all()}


def _walk_to_the_ends(machine: type[QuotesRuns]) -> None:
    """A budget halt, continued; a run crashed in every recovery until it is failed."""
    m = machine()
    try:
        m.every_run_holds()
        halted = m.start_on_a_tight_budget(limits=Limits(max_steps=1))
        m.every_run_holds()
        m.continue_(run_id=halted)
        m.every_run_holds()
        doomed = m.start()
        m.every_run_holds()
        m.crash_in_every_recovery(run_id=doomed, where="send")
        m.every_run_holds()
    finally:
        m.teardown()


def test_quotes_runs__invariants_hold_under_any_sequence(database_url: str) -> None:
    machine = machine_for(database_url)

    _walk_to_the_ends(machine)
    assert {"budget", FailReason.recovery_exhausted} <= machine.reached, machine.reached

    run_state_machine_as_test(machine, settings=MACHINE)
