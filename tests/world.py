"""What the example harnesses share: a runtime on a test database and its approvals."""

from __future__ import annotations

from dataclasses import dataclass

from resume.runtime import Runtime
from store import claims
from store.records import Approval, Run


@dataclass
class World:
    rt: Runtime

    async def pending(self, run: Run) -> Approval:
        """The open approval of a suspended run."""
        mine = [a for a in await claims.approvals_of(self.rt.db, run.id)
                if a.token == run.pending_token]
        assert mine, f"run {run.id} has no open approval (state {run.state})"
        return mine[0]
