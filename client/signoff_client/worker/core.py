"""``Worker``: resumes paused agents once signoff has decided their calls.

A pass lists every registered gate's pause store, reads each paused run's calls from the API
(``wait=0``), and starts one task per run whose calls are all decided (an expired call counts:
the agent is told it expired). Runs still waiting are left; between passes the worker
long-polls their pending calls (at most ``concurrency`` at once), or waits for a webhook, and
passes again every ``rescan_seconds`` to find new pauses. The webhook body is never trusted:
it only wakes a pass, which reads the calls from the API.

A run is resumed by one task at a time in a worker; across workers, and when a pause is
resumed twice, signoff's execution claim makes the tool run once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from signoff_client import errors
from signoff_client.adapters.pauses import BadPause, ListedPauses, PauseRecord, load_record
from signoff_client.client import Signoff
from signoff_client.models import CallStatus, RunInfo
from signoff_client.rounds import call_status
from signoff_client.runs import Run
from signoff_client.transport import MAX_WAIT, Api
from signoff_client.worker import agents
from signoff_client.worker.agents import AnswerFn, Registered

if TYPE_CHECKING:
    from signoff_client.adapters.langgraph import LangGraphGate
    from signoff_client.adapters.openai_agents import OpenAIAgentsGate
    from signoff_client.adapters.pydantic_ai import PydanticAIGate

log = logging.getLogger("signoff_client.worker")

PendingCall = tuple[str, str]  # (run_id, call_id)
#: Run states after which nothing may be resumed (a cancelled run is failed).
ENDED = frozenset({"answered", "failed"})


class Worker:
    """Register each agent's gate and agent (or graph), then ``await worker.serve(...)``."""

    def __init__(self, *, concurrency: int = 16, rescan_seconds: float = MAX_WAIT,
                 stop_grace_seconds: float = 10.0, read_seconds: float = 30.0) -> None:
        if concurrency < 1 or rescan_seconds <= 0:
            raise ValueError("concurrency must be at least 1 and rescan_seconds positive")
        self.concurrency, self.rescan_seconds = concurrency, rescan_seconds
        self.stop_grace_seconds = stop_grace_seconds
        #: How long a pass waits on signoff for one run; a run not read goes to the next pass.
        self.read_seconds = read_seconds
        self.registered: list[Registered] = []
        #: Paused runs this worker cannot resume, and why (reported once each).
        self.unresumable: dict[str, str] = {}
        #: Runs whose resume raised in this process; left paused, retried on restart.
        self.failed: dict[str, str] = {}
        self._active: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._signoff: Signoff | None = None

    # -- registration ------------------------------------------------------------------------

    def pydantic_ai(self, gate: PydanticAIGate[Any], agent: Any, *,
                    answer: AnswerFn | None = None, **options: Any) -> None:
        """Resume ``gate``'s paused runs with ``agent`` (``options`` go to ``agent.run``)."""
        self._add(agents.pydantic_ai(gate, agent, answer, options))

    def openai_agents(self, gate: OpenAIAgentsGate, agent: Any, *,
                      answer: AnswerFn | None = None, **options: Any) -> None:
        """Resume ``gate``'s paused runs with ``agent`` (``options`` go to ``Runner.run``)."""
        self._add(agents.openai_agents(gate, agent, answer, options))

    def langgraph(self, gate: LangGraphGate, graph: Any, *,
                  answer: AnswerFn | None = None) -> None:
        """Resume ``gate``'s paused threads with the compiled ``graph``."""
        self._add(agents.langgraph(gate, graph, answer))

    def _add(self, new: Registered) -> None:
        if any((r.adapter, r.name) == (new.adapter, new.name) for r in self.registered):
            raise ValueError(f"a {new.label()} is registered already: give each gate of the "
                             "same framework its own name=")
        self.registered.append(new)

    # -- running -----------------------------------------------------------------------------

    async def serve(self, so: Signoff, *, webhooks: bool = False) -> None:
        """Pass, wait, pass again, until ``stop()``. With ``webhooks`` the wait is for a
        webhook (``wake()``) or ``rescan_seconds``; else it long-polls the pending calls."""
        if not self.registered:
            raise ValueError("the worker has no agents registered: nothing to resume")
        self._signoff = so
        log.info("worker started with %s", ", ".join(r.label() for r in self.registered),
                 extra={"action": "worker_start"})
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                try:
                    pending = await self.run_pass()
                except Exception:  # the loop's boundary (a store that failed to list, say)
                    log.exception("worker pass failed; passing again after the wait",
                                  extra={"action": "worker_pass_failed"})
                    pending = []
                await self._wait(pending, long_poll=not webhooks)
        finally:
            await self._finish_active()
            log.info("worker stopped", extra={"action": "worker_stop"})

    def wake(self) -> None:
        """Pass again now (a webhook said something was decided)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    async def run_pass(self) -> list[PendingCall]:
        """Start a resume for each paused run whose calls are all decided; the pending calls
        of the others. Runs are read at most ``concurrency`` at once, each on its own: one
        that cannot be read is reported and the pass goes on."""
        limit = asyncio.Semaphore(self.concurrency)
        looks = []
        for pauses, candidates in self._stores():
            for run_id in pauses.paused():
                if run_id not in self._active and run_id not in self.failed:
                    looks.append(self._look(limit, pauses, candidates, run_id))
        return [call for waiting in await asyncio.gather(*looks) for call in waiting]

    async def _look(self, limit: asyncio.Semaphore, pauses: ListedPauses,
                    candidates: list[Registered], run_id: str) -> list[PendingCall]:
        async with limit:
            if self._stopping.is_set():
                return []  # stopping: no new resumes
            try:
                async with asyncio.timeout(self.read_seconds):
                    return await self._consider(pauses, candidates, run_id)
            except TimeoutError:
                log.warning("run %s: signoff did not answer within %.0fs; looked at again next "
                            "pass", run_id, self.read_seconds,
                            extra={"action": "worker_read_failed", "run_id": run_id})
            except Exception as exc:  # a pause that cannot be read must not stop the others
                self._unresumable(run_id, f"its pause could not be read "
                                          f"({type(exc).__name__}: {exc}); left paused, "
                                          "looked at again each pass")
            return []

    async def _consider(self, pauses: ListedPauses, candidates: list[Registered],
                        run_id: str) -> list[PendingCall]:
        try:
            record = load_record(pauses, run_id)
        except BadPause as exc:
            self._unresumable(run_id, str(exc))
            return []
        if record is None:
            return []  # resumed and cleared since the listing
        registered = agents.match(candidates, record)
        if registered is None and agents.match(self.registered, record) is not None:
            return []  # another store holds the same pauses; its own gate's pass takes it
        if registered is None:
            named = f"agent {record.agent!r}" if record.agent else "an unnamed agent"
            self._unresumable(run_id, f"it is paused for {named} ({record.adapter}), which "
                                      "this worker has not registered; left paused")
            return []
        try:
            _, body = await self._api().request("GET", f"/runs/{run_id}")
            info = RunInfo.model_validate(body)
            if info.state in ENDED:
                pauses.clear(run_id)
                log.info("run %s is %s on signoff already; not resumed, its pause cleared",
                         run_id, info.state, extra={"action": "worker_run_ended",
                                                    "run_id": run_id, "state": info.state})
                return []
            calls = [await call_status(self._api(), run_id, call_id)
                     for call_id in record.calls]
        except errors.SignoffError as exc:
            if isinstance(exc, errors.ApiError) and exc.status == 404:
                self._unresumable(run_id, "signoff has no such run or call for this "
                                          "worker's API key; left paused")
            else:
                log.warning("run %s: its calls could not be read (%s); looked at again next "
                            "pass", run_id, exc,
                            extra={"action": "worker_read_failed", "run_id": run_id})
            return []
        waiting = [(run_id, c.call_id) for c in calls if c.status is CallStatus.pending]
        if not waiting and not self._stopping.is_set() and run_id not in self._active:
            self._active[run_id] = asyncio.create_task(self._resume(registered, record, info),
                                                       name=f"signoff-resume-{run_id}")
        return waiting

    async def _resume(self, registered: Registered, record: PauseRecord,
                      info: RunInfo) -> None:
        """Resume the agent, finish the run, and only then clear the pause: a failure or a
        stop anywhere before leaves the record, so the run is found again."""
        run_id = record.run_id
        try:
            run = Run(self._api(), info, {}, record.requires or [])
            outcome = await registered.resume(run)
            if agents.still_paused(outcome):
                log.info("run %s resumed by the %s and paused again", run_id,
                         registered.label(), extra={"action": "worker_paused_again",
                                                    "run_id": run_id})
                return
            run.answer = registered.answer(outcome)
            if record.requires is None:
                registered.pauses.clear(run_id)
                log.warning("run %s resumed by the %s; its pause record is of the first "
                            "format, which does not say what the run requires, so the run "
                            "is left open: finish it yourself; the agent answered %r",
                            run_id, registered.label(), run.answer[:200],
                            extra={"action": "worker_left_open", "run_id": run_id})
                return
            await run.close(None)  # finish; a run that already ended is left as it is
            registered.pauses.clear(run_id)
            log.info("run %s resumed by the %s; the run is %s; the agent answered %r",
                     run_id, registered.label(), run.info.state, run.answer[:200],
                     extra={"action": "worker_resumed", "run_id": run_id,
                            "state": run.info.state})
        except errors.Unavailable as exc:
            log.warning("run %s: signoff was unreachable while resuming it (%s); left paused, "
                        "tried again next pass", run_id, exc,
                        extra={"action": "worker_resume_unreachable", "run_id": run_id})
        except Exception as exc:  # one run's failure must not stop the others
            self.failed[run_id] = f"{type(exc).__name__}: {exc}"
            log.exception("run %s: resuming it with the %s failed; left paused, tried again "
                          "when the worker restarts", run_id, registered.label(),
                          extra={"action": "worker_resume_failed", "run_id": run_id})
        finally:
            self._active.pop(run_id, None)
            self._wake.set()  # paused again or done: the next pass sees it as it is now

    async def _wait(self, pending: list[PendingCall], *, long_poll: bool) -> None:
        limit = asyncio.Semaphore(self.concurrency)

        async def poll(run_id: str, call_id: str) -> None:
            async with limit:
                if self._wake.is_set():
                    return
                with contextlib.suppress(errors.SignoffError):  # the next pass reads again
                    if (await call_status(self._api(), run_id, call_id, wait=MAX_WAIT)).status \
                            is not CallStatus.pending:
                        self._wake.set()

        polls = [asyncio.create_task(poll(*p)) for p in pending] if long_poll else []
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.rescan_seconds)
        finally:
            for task in polls:
                task.cancel()
            await asyncio.gather(*polls, return_exceptions=True)

    async def _finish_active(self) -> None:
        """Let resumes under way finish for a while, then cancel them: a cancelled resume
        leaves its pause record, and the claim keeps its tool from running twice."""
        tasks = list(self._active.values())
        if not tasks:
            return
        _, left = await asyncio.wait(tasks, timeout=self.stop_grace_seconds)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        if left:
            log.warning("stopped %d resume(s) under way; their runs stay paused", len(left),
                        extra={"action": "worker_resume_cancelled"})

    # -- helpers -----------------------------------------------------------------------------

    def _stores(self) -> list[tuple[ListedPauses, list[Registered]]]:
        """Each distinct pause store, with the registrations whose gates keep it."""
        stores: dict[object, tuple[ListedPauses, list[Registered]]] = {}
        for registered in self.registered:
            stores.setdefault(agents.store_key(registered.pauses), (registered.pauses, []))[1] \
                .append(registered)
        return list(stores.values())

    def _unresumable(self, run_id: str, why: str) -> None:
        if self.unresumable.get(run_id) != why:
            self.unresumable[run_id] = why
            log.warning("run %s cannot be resumed: %s", run_id, why,
                        extra={"action": "worker_unresumable", "run_id": run_id})

    def _api(self) -> Api:
        if self._signoff is None:
            raise errors.SignoffError("the worker is not serving: call serve() first")
        return self._signoff.api

