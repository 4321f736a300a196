"""Deploy safety: a snapshot written by other code is never resumed silently.

A run stores ``snapshot_version`` and the ``app_fingerprint`` it was written
under. Resuming under other code: an older supported version is migrated; a
pending request whose tool vanished or whose arguments no longer validate
fails the run loudly; anything else proceeds, with the change recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from resume import tools
from resume.app import SNAPSHOT_VERSION, App
from store.records import Run

#: Versions this code can migrate forward; none yet besides the current one.
SUPPORTED_VERSIONS = frozenset({SNAPSHOT_VERSION})


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str | None = None
    #: The fingerprint change to record as an event, when there is one.
    changed: dict[str, Any] | None = None


def check(app: App, run: Run, outstanding: set[str]) -> Verdict:
    """``outstanding``: ids of tool calls that have no result yet (only those can be pending)."""
    if run.snapshot_version not in SUPPORTED_VERSIONS:
        return Verdict(False, f"run was saved as snapshot version {run.snapshot_version}; this "
                              f"signoff reads {sorted(SUPPORTED_VERSIONS)}")
    pending = run.pending
    if pending is not None and pending.get("call_id") in outstanding:
        tool = app.tool(str(pending["tool"]))
        if tool is None:
            return Verdict(False, f"the pending request's tool {pending['tool']!r} no longer "
                                  "exists in this deployment")
        try:
            tool.parse(pending.get("args") or {})
        except ValidationError as exc:
            return Verdict(False, f"the pending request's arguments for {tool.name} no longer "
                                  f"validate: {tools.validation_message(exc)}")
    fingerprint = app.fingerprint()
    if fingerprint != run.app_fingerprint:
        return Verdict(True, changed={"from": run.app_fingerprint, "to": fingerprint})
    return Verdict(True)
