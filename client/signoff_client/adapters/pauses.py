"""Where an adapter keeps a paused agent's state while a person decides.

The state (a framework's message history, run state or thread config) is stored keyed by the
signoff run, so the agent's process may exit during the wait and any process resume it later.
Each pause is a ``PauseRecord``: which adapter and which agent it belongs to, the calls it
waits on, what the run requires, and the framework's state. ``FilePauses`` keeps one file per
run; give an adapter any object with ``save``, ``load`` and ``clear`` to keep them in your own
database, and add ``paused()`` (the run ids stored) so a resume worker can find them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from signoff_client import errors
from signoff_client.models import Call, CallStatus
from signoff_client.rounds import decision
from signoff_client.runs import Run

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")

#: The record format written now; records without a version are read as the first format.
VERSION = 2


class Pauses(Protocol):
    def save(self, run_id: str, state: bytes) -> None: ...

    def load(self, run_id: str) -> bytes | None: ...

    def clear(self, run_id: str) -> None: ...


class ListedPauses(Pauses, Protocol):
    """A store that can also say which runs are paused (what a resume worker needs)."""

    def paused(self) -> list[str]: ...


class BadPause(ValueError):
    """A stored pause that is not a pause record; it is left where it is."""


@dataclass(frozen=True)
class Paused:
    """The agent is paused on these signoff calls; ``resume`` continues it."""

    run_id: str
    call_ids: list[str]


@dataclass(frozen=True)
class PauseRecord:
    """One paused run: whose it is, what it waits on, and the framework's own state."""

    run_id: str
    adapter: str  #: "pydantic_ai", "openai_agents" or "langgraph"
    agent: str | None  #: the gate's name; None: the worker's only agent of that adapter
    calls: list[str]  #: the signoff calls the run waits on
    state: dict[str, Any]  #: the adapter's own state (message history, RunState, config)
    #: the tools the run must have run; None in a first-format record, which never said
    requires: list[str] | None = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": VERSION, "run_id": self.run_id, "adapter": self.adapter,
                           "agent": self.agent, "calls": self.calls,
                           "requires": self.requires, "state": self.state}).encode()

    @classmethod
    def from_bytes(cls, run_id: str, data: bytes) -> PauseRecord:
        try:
            stored = json.loads(data)
        except ValueError as exc:
            raise BadPause(f"the pause of run {run_id} is not JSON: {exc}") from None
        if not isinstance(stored, dict) or not isinstance(stored.get("calls"), list):
            raise BadPause(f"the pause of run {run_id} has no list of calls")
        if "version" in stored:
            try:
                return cls(run_id=str(stored.get("run_id") or run_id),
                           adapter=str(stored["adapter"]), agent=stored.get("agent"),
                           calls=[str(c) for c in stored["calls"]],
                           state=dict(stored["state"]),
                           requires=[str(t) for t in stored.get("requires") or []])
            except (KeyError, TypeError, ValueError) as exc:
                raise BadPause(f"the pause of run {run_id} is not a pause record "
                               f"({type(exc).__name__}: {exc})") from None
        # The first format: the adapter's state at the top level, no agent named.
        adapter = "pydantic_ai" if "messages" in stored else "openai_agents"
        return cls(run_id=run_id, adapter=adapter, agent=None, requires=None,
                   calls=[str(c) for c in stored["calls"]],
                   state={k: v for k, v in stored.items() if k != "calls"})


def load_record(pauses: Pauses, run_id: str) -> PauseRecord | None:
    stored = pauses.load(run_id)
    return PauseRecord.from_bytes(run_id, stored) if stored is not None else None


class PausingGate:
    """What a gate keeps its pauses with.

    ``name`` goes into each pause record, so a resume worker knows which agent to resume it
    with; ``ttl_minutes`` is how long each card waits (None: the server's default).
    """

    ADAPTER: ClassVar[str]  #: the adapter's name in its records
    PAUSED: ClassVar[str]  #: what a paused run of the adapter is called, for errors

    def __init__(self, pauses: Pauses | None, *, name: str | None = None,
                 ttl_minutes: float | None = None) -> None:
        self.pauses, self.name, self.ttl_minutes = pauses, name, ttl_minutes

    def _paused_on(self, run: Run, calls: list[str], state: dict[str, Any]) -> Paused:
        """Record the pause (with a store) and say so."""
        if self.pauses is not None:
            self.pauses.save(run.id, PauseRecord(
                run_id=run.id, adapter=self.ADAPTER, agent=self.name, calls=calls,
                requires=run.requires, state=state).to_bytes())
        return Paused(run.id, calls)

    def _pause_of(self, run: Run) -> PauseRecord:
        record = load_record(self.pauses, run.id) if self.pauses is not None else None
        if record is None or record.adapter != self.ADAPTER:
            raise errors.SignoffError(f"run {run.id} has no {self.PAUSED}")
        return record

    async def _decided(self, run: Run, call_ids: list[str], *, wait: bool) -> list[Call] | None:
        """Each call once decided; None while one is still pending (only when not waiting)."""
        decided = []
        for call_id in call_ids:
            call = await decision(run.api, run.id, call_id, wait=wait)
            if call.status is CallStatus.pending:
                return None
            decided.append(call)
        return decided

    def _ended(self, run: Run, keep_pause: bool) -> None:
        """The agent ended: its pause is over (kept, for a worker that clears it only once
        it has finished the run, so a failure in between leaves the run findable)."""
        if self.pauses is not None and not keep_pause:
            self.pauses.clear(run.id)


class FilePauses:
    """One file per paused run under ``directory``, replaced atomically on each save."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{_SAFE.sub('_', run_id)}.json"

    def save(self, run_id: str, state: bytes) -> None:
        path = self._path(run_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(state)
        os.replace(tmp, path)

    def load(self, run_id: str) -> bytes | None:
        try:
            return self._path(run_id).read_bytes()
        except FileNotFoundError:
            return None  # never paused, or resumed and cleared

    def clear(self, run_id: str) -> None:
        self._path(run_id).unlink(missing_ok=True)

    def paused(self) -> list[str]:
        """The run ids stored, oldest pause first (a file name is the id made safe, so the
        id is read from the record; a first-format record has only its file name)."""
        found = []
        for path in sorted(self.directory.glob("*.json"), key=_mtime):
            try:
                stored = json.loads(path.read_bytes())
            except (OSError, ValueError):
                stored = None  # cleared meanwhile, or unreadable: load() will say which
            run_id = stored.get("run_id") if isinstance(stored, dict) else None
            found.append(str(run_id) if run_id else path.stem)
        return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
