"""The App: one object bundling an agent's tools, scope resolver, model and router.

``SIGNOFF_APP=module:attr`` names it; ``load`` imports it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from resume.budget import Limits
from resume.model import Model
from resume.routes import Router
from resume.scope import ScopeResolver
from resume.tools import Tool

#: Bumped by hand whenever the persisted shape of a run (messages, pending
#: request, limits) changes; register the old version's migration in
#: ``resume.snapshots.MIGRATIONS`` so its runs are migrated on resume, not failed.
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

    def __post_init__(self) -> None:
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
