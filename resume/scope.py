"""Scope: what a user may do, resolved by the app, re-resolved on every resume."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Scope(BaseModel):
    """Which tools and resources a user may use.

    ``tools`` lists tool names, or ``"*"`` for all. ``resources`` maps a
    resource kind (e.g. "account") to the ids the user may touch; a tool's
    guard or preview reads them. ``attrs`` is free-form app data.
    """

    model_config = ConfigDict(frozen=True)

    user_id: str
    tools: list[str] | str = Field(default_factory=list)
    resources: dict[str, list[str]] = Field(default_factory=dict)
    attrs: dict[str, Any] = Field(default_factory=dict)

    def permits(self, tool: str) -> bool:
        return self.tools == "*" or (isinstance(self.tools, list) and tool in self.tools)

    def may_use(self, kind: str, resource_id: str) -> bool:
        allowed = self.resources.get(kind)
        return allowed is not None and ("*" in allowed or resource_id in allowed)


#: The app's resolver: user id -> the user's scope as it is now.
ScopeResolver = Callable[[str], Awaitable[Scope]]
