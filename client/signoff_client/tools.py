"""A gated tool as the client knows it: the function, and the hooks signoff calls around it.

Every hook may be a plain or an ``async`` function. ``preview(args)`` renders what the
approver sees, now; ``guard(args)`` checks the world just before the execution claim;
``reconcile(idempotency_key, args)`` answers "did the write with this key happen?" after
a crash. A plain (blocking) tool function runs in a worker thread, so the lease's
heartbeats keep going while it works.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, cast

from signoff_client.models import JsonObject, Preview, default_preview

T = TypeVar("T")


@dataclass(frozen=True)
class Guard:
    """A guard's verdict: ok, or a code and a message for the card and the agent.

    The server's hosted apps use this same class (``resume.Guard``).
    """

    ok: bool
    code: str | None = None
    message: str | None = None

    @classmethod
    def passed(cls) -> Guard:
        return cls(True)

    @classmethod
    def blocked(cls, code: str, message: str) -> Guard:
        return cls(False, code, message)


@dataclass(frozen=True)
class Reconciliation:
    """What a tool's ``reconcile`` found out about a write made with an idempotency key."""

    outcome: Literal["done", "not_done", "cannot_tell"]
    result: Any = None

    @classmethod
    def done(cls, result: Any) -> Reconciliation:
        return cls("done", result)

    @classmethod
    def not_done(cls) -> Reconciliation:
        return cls("not_done")

    @classmethod
    def cannot_tell(cls) -> Reconciliation:
        return cls("cannot_tell")


PreviewFn = Callable[[JsonObject], Preview | Awaitable[Preview]]
GuardFn = Callable[[JsonObject], Guard | Awaitable[Guard]]
ReconcileFn = Callable[[str, JsonObject], Reconciliation | Awaitable[Reconciliation]]
EvidenceFn = Callable[[JsonObject], JsonObject]
ExecuteFn = Callable[..., Any]


async def resolve(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await cast(Awaitable[T], value)
    return value


@dataclass(frozen=True)
class Tool:
    """A tool's name, its function (called with the arguments as keywords) and its hooks."""

    name: str
    execute: ExecuteFn | None = None
    preview: PreviewFn | None = None
    guard: GuardFn | None = None
    reconcile: ReconcileFn | None = None
    evidence: EvidenceFn | None = None

    def with_overrides(self, **hooks: Any) -> Tool:
        """This tool with the given hooks replaced; None leaves a hook as it is."""
        return replace(self, **{k: v for k, v in hooks.items() if v is not None})

    async def render(self, args: JsonObject) -> Preview:
        if self.preview is None:
            return default_preview(self.name, args)
        return await resolve(self.preview(args))

    async def check(self, args: JsonObject) -> Guard:
        if self.guard is None:
            return Guard.passed()
        return await resolve(self.guard(args))

    async def run(self, args: JsonObject) -> Any:
        if self.execute is None:
            raise TypeError(f"tool {self.name!r} has no function to run: pass execute=..., "
                            "or register it with @so.requires_approval")
        if inspect.iscoroutinefunction(self.execute):
            return await self.execute(**args)
        return await resolve(await asyncio.to_thread(self.execute, **args))

    async def find_out(self, idempotency_key: str, args: JsonObject) -> Reconciliation:
        if self.reconcile is None:
            return Reconciliation.cannot_tell()
        return await resolve(self.reconcile(idempotency_key, args))

    def evidence_of(self, result: JsonObject) -> JsonObject | None:
        return self.evidence(result) if self.evidence is not None else None
