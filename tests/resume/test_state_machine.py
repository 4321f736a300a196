"""A hypothesis state machine over the real store: start, approve, decline, expire, crash and
recover, continue and cancel quotes runs in any order, on SQLite and PostgreSQL.

After every step, for every run the machine started:

- at most one CRM send per approved tool call, and no more sends than approvals;
- budget consumption (step, spend_usd, tool_calls, elapsed_ms) never decreases;
- answered and failed runs stay exactly as they ended;
- a suspended run has exactly one undecided approval, the one whose token is
  ``runs.pending_token``; every other token of the run is refused;
- every change to a state other than ``running`` appended an event.

A "crash" is a claim whose drive never ran (the process died right after
the click); time moves by assignment to the runtime's clock and by writing
heartbeats into the past, never by sleeping. Hypothesis machines are
synchronous, so each machine drives the async code through its own event
loop (``asyncio.Runner``); the database is shared by the examples of one
test and each machine checks only the runs it started.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import func, select

from examples import crm as crm_tables
from resume import confirmation, continuation, expiry, outcomes, recovery, starting
from resume.runtime import Runtime
from store import approvals, engine, events, ledger, runs
from store.records import Run
from store.states import RunState
from tests.quotes_harness import ASK, quotes_world

USER = "U_REP"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(seconds=1)
TERMINAL = (RunState.answered, RunState.failed)
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


class QuotesRuns(RuleBasedStateMachine):
    """The machine; :func:`machine_for` binds it to a database."""

    url = ""
    started = Bundle("started")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.Runner()
        self.db = engine.connect(self.url)
        self.clock = Clock(T0)
        world = self.loop.run(quotes_world(self.db, clock=self.clock))
        self.rt, self.crm = world.rt, world.crm
        #: A second process: it takes over what the first left behind.
        self.reaper = Runtime(db=self.db, app=self.rt.app, owner_id="proc_reaper",
                              clock=self.clock)
        self.seen: dict[str, Seen] = {}

    def teardown(self) -> None:
        self.loop.run(self.db.dispose())
        self.loop.close()

    def run(self, coro: Any) -> Any:
        return self.loop.run(coro)

    def get(self, run_id: str) -> Run:
        result: Run = self.run(runs.get(self.db, run_id))
        return result

    # -- rules -------------------------------------------------------------------

    @rule(target=started)
    def start(self) -> str:
        run: Run = self.run(starting.start(self.rt, USER, ASK))
        assert run.state is RunState.suspended, run.halt_reason
        self.seen[run.id] = Seen(run.state, run.event_seq, _consumed(run))
        return run.id

    @rule(run_id=started)
    def approve(self, run_id: str) -> None:
        self._decide(run_id, "approve")

    @rule(run_id=started)
    def decline(self, run_id: str) -> None:
        self._decide(run_id, "decline")

    def _decide(self, run_id: str, decision: confirmation.Decision) -> None:
        run = self.get(run_id)
        result = self.run(confirmation.resume_after_confirmation(
            self.rt, run.pending_token or "tok_none", decision, USER))
        if run.state is RunState.suspended:
            assert not isinstance(result, outcomes.Refusal), result
        else:
            assert isinstance(result, outcomes.Refusal), (run.state, result)

    @rule(run_id=started)
    def click_an_old_card(self, run_id: str) -> None:
        """Every token of the run but the pending one is refused and changes nothing."""
        run = self.get(run_id)
        for approval in self.run(approvals.for_run(self.db, run_id)):
            if approval.token == run.pending_token and run.state is RunState.suspended:
                continue
            refused = self.run(confirmation.decide(self.rt, approval.token, "approve", USER))
            assert isinstance(refused, outcomes.Refusal), (approval.token, run.state)
        after = self.get(run_id)
        assert (after.state, after.event_seq) == (run.state, run.event_seq)

    @rule(run_id=started)
    def expire(self, run_id: str) -> None:
        run = self.get(run_id)
        if run.expires_at is not None:
            self.clock.advance_to(run.expires_at)
        expired = self.run(expiry.expire_suspended(self.rt, now=self.clock.at))
        if run.state is RunState.suspended and run.expires_at is not None:
            assert run_id in [r.id for r in expired]

    @rule(run_id=started)
    def click_then_crash(self, run_id: str) -> None:
        """The click is claimed, then the process dies before it does anything else."""
        run = self.get(run_id)
        claimed = self.run(confirmation.decide(self.rt, run.pending_token or "tok_none",
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
        self.run(recovery.recover_orphans(self.reaper, now=self.clock.at))
        for run_id in self.seen:
            assert self.get(run_id).state is not RunState.running, "an orphan was left"

    @rule(run_id=started)
    def continue_(self, run_id: str) -> None:
        run = self.get(run_id)
        result = self.run(continuation.continue_run(self.rt, run_id, USER))
        continued = isinstance(result, continuation.Continued)
        assert continued == (run.state is RunState.halted), (run.state, result)

    @rule(run_id=started)
    def cancel(self, run_id: str) -> None:
        run = self.get(run_id)
        result = self.run(continuation.cancel(self.rt, run_id, USER))
        cancellable = run.state in (RunState.suspended, RunState.halted)
        assert isinstance(result, continuation.Cancelled) == cancellable, (run.state, result)

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
            seen.state, seen.event_seq, seen.consumed = run.state, run.event_seq, _consumed(run)
            if run.state in TERMINAL and seen.ended is None:
                seen.ended = run

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
            return
        assert run.pending_token and run.expires_at is not None
        undecided = [a.token for a in self.run(approvals.for_run(self.db, run.id))
                     if a.decided_at is None and a.token == run.pending_token]
        assert undecided == [run.pending_token], f"{run.id}: live tokens {undecided}"

    def _events(self, run: Run, seen: Seen) -> None:
        if run.state is not seen.state and run.state is not RunState.running:
            assert run.event_seq > seen.event_seq, (
                f"{run.id}: {seen.state.value} -> {run.state.value} without an event")


def machine_for(url: str) -> type[QuotesRuns]:
    return type("QuotesRunsOn", (QuotesRuns,), {"url": url})


async def _sends_by_key(db: engine.Database, keys: list[str]) -> dict[str, int]:
    if not keys:
        return {}
    quotes = crm_tables.quotes
    stmt = (select(quotes.c.send_key, func.count()).where(quotes.c.send_key.in_(keys))
            .group_by(quotes.c.send_key))
    async with db.read() as conn:
        return {key: int(n) for key, n in (await conn.execute(stmt)).all()}


def test_quotes_runs__invariants_hold_under_any_sequence(database_url: str) -> None:
    run_state_machine_as_test(machine_for(database_url), settings=MACHINE)
