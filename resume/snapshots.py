"""Deploy safety: a snapshot written by other code is never resumed silently.

A run stores ``snapshot_version`` and the ``app_fingerprint`` it was written
under. Resuming under other code: an older supported version is migrated; a
pending request whose tool vanished or whose arguments no longer validate
fails the run loudly; anything else proceeds, with the change recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from resume import tools
from resume.apps import SNAPSHOT_VERSION, App
from resume.messages import Message
from store import records
from store.records import Run


@dataclass(frozen=True)
class Snapshot:
    """The stored documents of a run whose shape ``snapshot_version`` covers."""

    pending: dict[str, Any] | None
    pending_preview: dict[str, Any] | None
    limits: dict[str, Any]

    @classmethod
    def of(cls, run: Run) -> Snapshot:
        return cls(run.pending, run.pending_preview, run.limits)


#: Rewrites a snapshot one version forward. It may read the conversation, not
#: rewrite it: messages are append-only, and resuming hands them to the model as stored.
Migration = Callable[[Snapshot, Sequence[Message]], Snapshot]

#: ``MIGRATIONS[v]`` turns a version-``v`` snapshot into version ``v + 1``. Register
#: the old version here when bumping SNAPSHOT_VERSION; a version with no chain of
#: migrations up to the current one is unsupported (``snapshot_incompatible``).
MIGRATIONS: dict[int, Migration] = {}


def supported_versions() -> frozenset[int]:
    """The current version and every older one with a chain of migrations up to it."""
    oldest = SNAPSHOT_VERSION
    while oldest - 1 in MIGRATIONS:
        oldest -= 1
    return frozenset(range(oldest, SNAPSHOT_VERSION + 1))


@dataclass(frozen=True)
class Migrated:
    """A snapshot migrated in memory, written with the version bump in one transaction."""

    from_version: int
    snapshot: Snapshot
    #: The run's columns to write, encoded here so a bad document fails the check.
    values: dict[str, Any]

    def event(self) -> dict[str, Any]:
        return {"from": self.from_version, "to": SNAPSHOT_VERSION}


def migrate(run: Run, conversation: Sequence[Message]) -> Migrated:
    """Apply the registered migrations from the run's version up to the current one."""
    s = Snapshot.of(run)
    for version in range(run.snapshot_version, SNAPSHOT_VERSION):
        s = MIGRATIONS[version](s, conversation)
    values = {
        "snapshot_version": SNAPSHOT_VERSION,
        "pending": None if s.pending is None else records.dumps(s.pending, what="pending request"),
        "pending_preview": (None if s.pending_preview is None
                            else records.dumps(s.pending_preview, what="preview")),
        "limits": records.dumps(s.limits, what="limits"),
    }
    return Migrated(run.snapshot_version, s, values)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str | None = None
    #: The fingerprint change to record as an event, when there is one.
    changed: dict[str, Any] | None = None
    #: The migration to write, when the run was saved by an older supported version.
    migrated: Migrated | None = None


def check(
    app: App, run: Run, outstanding: set[str], conversation: Sequence[Message] = ()
) -> Verdict:
    """``outstanding``: ids of tool calls that have no result yet (only those can be pending).

    An older supported snapshot is migrated (in memory) first; the pending
    request is then checked in its migrated shape.
    """
    migrated: Migrated | None = None
    if run.snapshot_version != SNAPSHOT_VERSION:
        supported = supported_versions()
        if run.snapshot_version not in supported:
            return Verdict(False, f"run was saved as snapshot version {run.snapshot_version}; "
                                  f"this signoff reads {sorted(supported)}")
        try:
            migrated = migrate(run, conversation)
        except Exception as exc:  # a bug in a migration must fail the run, not the reaper
            return Verdict(False, f"migrating the run from snapshot version "
                                  f"{run.snapshot_version} failed: {type(exc).__name__}: {exc}")
    pending = (migrated.snapshot if migrated else Snapshot.of(run)).pending
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
    changed = None
    if fingerprint != run.app_fingerprint:
        changed = {"from": run.app_fingerprint, "to": fingerprint}
    return Verdict(True, changed=changed, migrated=migrated)
