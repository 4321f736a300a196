"""Entry: a hosted run started through the API (``POST /api/v1/runs`` with a question).

The run is started by the same ``ask`` entry as `/signoff ask`; this adds
what the API needs: the key that made it (another key's run answers
not_found) and its idempotency key (the same body again returns the same run;
another body is refused). Two concurrent first creates with one idempotency
key may both start a run; only the first is linked to the key, and the
second answers with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from resume import ask
from resume.drive import Drive
from resume.outcomes import ApiRefusal, ApiRefused
from resume.runtime import Runtime
from store import api_runs, runs
from store.api_records import ApiKey, ApiRun
from store.records import Run


@dataclass(frozen=True)
class HostedRun:
    """The key's run (``created`` by this call, or found again); ``drive``: a run this call
    started, which the door spawns (a lost race's run included: it was asked)."""

    run: Run
    drive: Drive | None
    created: bool


async def start_hosted(
    rt: Runtime, key: ApiKey, *, requester: str, question: str, idempotency_key: str,
    request_digest: str,
) -> HostedRun | ApiRefused:
    existing = await api_runs.by_idempotency(rt.db, key.id, idempotency_key)
    if existing is not None:
        return await _again(rt, existing, request_digest)
    asked = await ask.ask(rt, requester, question)
    origin = api_runs.Origin(key_id=key.id, idempotency_key=idempotency_key,
                             request_digest=request_digest, external=False)
    if await api_runs.link(rt.db, asked.run.id, origin, now=rt.now()) is None:
        winner = await api_runs.by_idempotency(rt.db, key.id, idempotency_key)
        if winner is not None:
            again = await _again(rt, winner, request_digest)
            if isinstance(again, HostedRun):
                return HostedRun(again.run, asked.drive, created=False)
            return again
    return HostedRun(asked.run, asked.drive, created=True)


async def _again(rt: Runtime, existing: ApiRun, request_digest: str) -> HostedRun | ApiRefused:
    if existing.request_digest != request_digest:
        return ApiRefused(ApiRefusal.idempotency_conflict,
                          f"idempotency key {existing.idempotency_key!r} was used for run "
                          f"{existing.run_id} with another body; use a new key for a new run")
    return HostedRun(await runs.get(rt.db, existing.run_id), None, created=False)
