"""The App: one object bundling an agent's tools, scope resolver, model and router.

``SIGNOFF_APP=module:attr`` names it; ``load`` imports it.

Deploy safety: a snapshot written by other code is never resumed silently.
A run stores ``snapshot_version`` and the ``app_fingerprint`` it was written
under. Resuming under other code (``check_snapshot``): an older supported
version is migrated; a pending request whose tool vanished or whose arguments
no longer validate fails the run loudly; anything else proceeds, with the
change recorded.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from resume import tools
from resume.budget import Limits
from resume.messages import Message
from resume.model import Model
from resume.routes import Router
from resume.tools import ScopeResolver, Tool
from store import records
from store.records import Run

#: Bumped by hand whenever the persisted shape of a run (messages, pending
#: request, limits) changes; register the old version's migration in
#: ``MIGRATIONS`` (below) so its runs are migrated on resume, not failed.
SNAPSHOT_VERSION = 1


@dataclass
class App:
    name: str
    tools: Sequence[Tool[Any]]
    scope: ScopeResolver
    model: Model
    system_prompt: str = "You are a careful assistant. Use the tools; ask before acting."
    limits: Limits = field(default_factory=Limits)
    router: Router | None = None
    #: For an app without a router: the tools that must have succeeded for a run to
    #: count as answered (a router's branches carry their own). A run that ends
    #: without them failed (``incomplete``), however well its last message reads.
    contract: Sequence[str] = ()
    #: Questions that work with this app: the sandbox page and ``/signoff help`` offer them.
    examples: Sequence[str] = ()
    #: The sandbox page's world panel: called once when the sandbox starts, it returns
    #: the controls the panel drives (``bot.sandbox.page.Controls``). None: no panel.
    world: Callable[[], Awaitable[Any]] | None = None

    def __post_init__(self) -> None:
        if any(not isinstance(e, str) or not e.strip() for e in self.examples):
            raise ValueError(f"app {self.name!r}: each example must be a non-blank question")
        self.examples = [e.strip() for e in self.examples]
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError(f"app {self.name!r} defines a tool name twice: {sorted(names)}")
        self._by_name = {t.name: t for t in self.tools}
        if self.contract and self.router is not None:
            raise ValueError(f"app {self.name!r}: with a router, contracts go on its branches")
        if unknown := sorted(set(self.contract) - set(names)):
            raise ValueError(f"app {self.name!r}: its contract names unknown tools {unknown}")

    def tool(self, name: str) -> Tool[Any] | None:
        return self._by_name.get(name)

    def fingerprint(self) -> str:
        """Digest of tool names, argument schemas and route tables: what a snapshot relies on."""
        shape = {
            "tools": {t.name: t.args.model_json_schema() for t in self.tools},
            "router": (
                {"name": self.router.name, "table": self.router.digest()} if self.router else None
            ),
        }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def load(ref: str) -> App:
    """Import ``module:attr`` and return the App it names (a callable returning one is called)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"SIGNOFF_APP must look like 'package.module:attr', got {ref!r}")
    target: Any = getattr(importlib.import_module(module_name), attr)
    app = target() if callable(target) and not isinstance(target, App) else target
    if not isinstance(app, App):
        raise TypeError(f"{ref} is a {type(app).__name__}, not a resume.App")
    return app


# --- Snapshots: what a stored run relies on, checked on resume ----------------------------
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


def migrate_snapshot(run: Run, conversation: Sequence[Message]) -> Migrated:
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
class SnapshotVerdict:
    ok: bool
    detail: str | None = None
    #: The fingerprint change to record as an event, when there is one.
    changed: dict[str, Any] | None = None
    #: The migration to write, when the run was saved by an older supported version.
    migrated: Migrated | None = None


def check_snapshot(
    app: App, run: Run, outstanding: set[str], conversation: Sequence[Message] = ()
) -> SnapshotVerdict:
    """``outstanding``: ids of tool calls that have no result yet (only those can be pending).

    An older supported snapshot is migrated (in memory) first; the pending
    request is then checked in its migrated shape.
    """
    migrated: Migrated | None = None
    if run.snapshot_version != SNAPSHOT_VERSION:
        supported = supported_versions()
        if run.snapshot_version not in supported:
            return SnapshotVerdict(False, f"run was saved as snapshot version "
                                          f"{run.snapshot_version}; this signoff reads "
                                          f"{sorted(supported)}")
        try:
            migrated = migrate_snapshot(run, conversation)
        except Exception as exc:  # a bug in a migration must fail the run, not the reaper
            return SnapshotVerdict(False, f"migrating the run from snapshot version "
                                          f"{run.snapshot_version} failed: "
                                          f"{type(exc).__name__}: {exc}")
    pending = (migrated.snapshot if migrated else Snapshot.of(run)).pending
    if pending is not None and pending.get("call_id") in outstanding:
        tool = app.tool(str(pending["tool"]))
        if tool is None:
            return SnapshotVerdict(False, f"the pending request's tool {pending['tool']!r} "
                                          "no longer exists in this deployment")
        try:
            tool.parse(pending.get("args") or {})
        except ValidationError as exc:
            return SnapshotVerdict(False, f"the pending request's arguments for {tool.name} "
                                          f"no longer validate: {tools.validation_message(exc)}")
    fingerprint = app.fingerprint()
    changed = None
    if fingerprint != run.app_fingerprint:
        changed = {"from": run.app_fingerprint, "to": fingerprint}
    return SnapshotVerdict(True, changed=changed, migrated=migrated)
