"""Entry: an agent elsewhere starts an external run (``POST /api/v1/runs`` with ``external``).

The same key and idempotency key return the same run; with another request
body they are refused (``idempotency_conflict``) and nothing is created.
Concurrent creates with one idempotency key create one run.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from resume import ask, budget
from resume.apps import SNAPSHOT_VERSION
from resume.outcomes import ApiRefusal, ApiRefused, ExternalRun
from resume.runtime import Runtime
from store import api_runs, records, runs
from store.api_records import ApiKey, ApiRun
from store.events import EventKind
from store.runs import NewRun
from store.transitions import Effects

log = logging.getLogger(__name__)



async def start_external(
    rt: Runtime, key: ApiKey, *, requester: str, title: str, idempotency_key: str,
    limits: dict[str, Any], request_digest: str,
) -> ExternalRun | ApiRefused:
    """Create the run, running with nobody here holding it, or find the one made before."""
    existing = await api_runs.by_idempotency(rt.db, key.id, idempotency_key)
    if existing is not None:
        return await _again(rt, existing, request_digest)
    try:
        checked = budget.Limits.model_validate(limits)
    except ValidationError as exc:
        return ApiRefused(ApiRefusal.invalid, f"limits: {exc.errors()[0]['msg']}")
    new = NewRun(id=ask.new_run_id(), user_id=requester, question=title,
                 limits=checked.model_dump(), owner_id=rt.owner_id,
                 snapshot_version=SNAPSHOT_VERSION, app_fingerprint=records.EXTERNAL_FINGERPRINT,
                 slack_channel=rt.approvals_channel)
    origin = api_runs.Origin(key_id=key.id, idempotency_key=idempotency_key,
                             request_digest=request_digest, external=True)
    fx = Effects(events=[(EventKind.started_external, {"key": key.name, "requester": requester,
                                               "limits": checked.model_dump()})])
    created = await api_runs.create_external(rt.db, new, origin, now=rt.now(), fx=fx)
    if isinstance(created, ApiRun):
        return await _again(rt, created, request_digest)
    log.info("external run %s started by key %s", created.id, key.name,
             extra={"action": "start_external", "run_id": created.id, "key": key.name})
    return ExternalRun(created, created=True)


async def _again(rt: Runtime, existing: ApiRun, request_digest: str) -> ExternalRun | ApiRefused:
    if existing.request_digest != request_digest:
        return ApiRefused(ApiRefusal.idempotency_conflict,
                          f"idempotency key {existing.idempotency_key!r} was used for run "
                          f"{existing.run_id} with another body; use a new key for a new run")
    return ExternalRun(await runs.get(rt.db, existing.run_id), created=False)
