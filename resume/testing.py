"""Testing an app the way signoff runs it: a real database, the real entries, no Slack.

::

    from resume.testing import Journey

    async with Journey.open(app, tmp_path / "test.db") as journey:
        run = await journey.ask("U0RILEY", "refund order A-100")
        outcome = await journey.approve(run, "U0SAM")

Each step awaits the whole journey (the drive after an ask or a decision),
where ``signoff serve`` would carry it on in the background.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resume import ask, decide, proceed
from resume.apps import App
from resume.messages import Message
from resume.outcomes import CallOutcome, Claimed, Decision, Refusal
from resume.runtime import Runtime
from resume.scripted import result_of
from store import migrate, runs
from store.engine import connect
from store.records import Run


@dataclass
class Journey:
    """An app on its own SQLite file, driven through ``resume``'s entries."""

    rt: Runtime

    @classmethod
    @asynccontextmanager
    async def open(cls, app: App, database: Path | str, **runtime: Any) -> AsyncIterator[Journey]:
        """The app on a fresh SQLite file at ``database`` (migrated); ``runtime``: Runtime's
        other settings (``suspension_ttl``, ``clock``, ...)."""
        db = connect(f"sqlite+aiosqlite:///{database}")
        try:
            await migrate.upgrade(db)
            yield cls(Runtime(db=db, app=app, **runtime))
        finally:
            await db.dispose()

    async def ask(self, user_id: str, question: str) -> Run:
        """Start a run; return it where it stopped (suspended, answered, failed, halted)."""
        asked = await ask.ask(self.rt, user_id, question)
        return (await asked.drive.go()).run

    async def approve(self, run: Run, actor: str) -> CallOutcome | Refusal:
        """``actor`` clicks Approve on the run's waiting card; the run goes on as far as it can."""
        return await self._decide(run, "approve", actor, None)

    async def decline(self, run: Run, actor: str, reason: str | None = None
                      ) -> CallOutcome | Refusal:
        """``actor`` declines the run's waiting card, with an optional reason."""
        return await self._decide(run, "decline", actor, reason)

    async def _decide(self, run: Run, decision: Decision, actor: str,
                      reason: str | None) -> CallOutcome | Refusal:
        claimed = await decide.decide(self.rt, run.pending_token or "", decision, actor, reason)
        if not isinstance(claimed, Claimed):
            return claimed
        return await proceed.proceed(claimed)

    async def run(self, run_id: str) -> Run:
        """The run as stored now."""
        return await runs.get(self.rt.db, run_id)

    async def results(self, run: Run, tool: str) -> list[dict[str, Any]]:
        """What the model was given back for each call of ``tool``, in order."""
        said = [Message.model_validate(m) for m in await runs.conversation(self.rt.db, run.id)]
        return [result_of(m) for m in said if m.role == "tool" and m.name == tool]
