"""What a run did, from its ledger, as the notices show it: each tool call that ran.

Every outcome notice (answered, failed, paused, expired, cancelled) carries
this list, so a person is never told "ask again" without seeing that a
confirmed write, such as a quote sent to a customer, already happened.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resume.apps import App
from resume.outbox import DeclineData, EvidenceItem
from store import claims, ledger
from store.engine import Database
from store.records import LedgerEntry
from store.states import LedgerStatus


def items(app: App, entries: Iterable[LedgerEntry]) -> list[EvidenceItem]:
    """One item per call that finished (succeeded or failed), in ledger order."""
    out = []
    for entry in entries:
        if entry.status not in (LedgerStatus.succeeded, LedgerStatus.failed):
            continue
        tool = app.tool(entry.tool)
        fields: dict[str, Any] = tool.key_fields(entry.result) if tool is not None else {}
        confirmed = tool is not None and tool.confirm is not False
        out.append(EvidenceItem(tool=entry.tool, status=entry.status.value, fields=fields,
                                confirmed=confirmed))
    return out


async def of_run(db: Database, app: App, run_id: str) -> list[EvidenceItem]:
    """The run's finished tool calls, read from the ledger now."""
    return items(app, await ledger.for_run(db, run_id))


async def last_decline(db: Database, run_id: str) -> DeclineData | None:
    """The latest decline of one of the run's requests, if a person declined one."""
    declined = [a for a in await claims.approvals_of(db, run_id) if a.decision == "decline"]
    if not declined or declined[-1].decided_by is None:
        return None
    last = declined[-1]
    return DeclineData(by=last.decided_by or "", reason=last.reason, tool=last.tool)
