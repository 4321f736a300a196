"""``Signoff``: one API key's connection to a signoff server, and the tools it gates."""

from __future__ import annotations

import functools
import inspect
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx

from signoff_client import errors
from signoff_client.context import current_run, running
from signoff_client.models import Call, CallStatus, Limits, RunInfo
from signoff_client.rounds import settle_unknown
from signoff_client.runs import Run
from signoff_client.tools import EvidenceFn, GuardFn, PreviewFn, ReconcileFn, Tool
from signoff_client.transport import Api

#: What ``requires_approval`` makes of a function: a coroutine function (``create_task`` takes it).
Gated = Callable[..., Coroutine[Any, Any, Any]]

log = logging.getLogger("signoff_client")
F = TypeVar("F", bound=Callable[..., Any])


class Signoff:
    """Talk to signoff at ``url`` with an API key from ``signoff api-keys create``."""

    def __init__(self, url: str, api_key: str, *, give_up_after: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.api = Api(url, api_key, give_up_after=give_up_after, transport=transport)
        self.tools: dict[str, Tool] = {}

    async def aclose(self) -> None:
        await self.api.aclose()

    async def __aenter__(self) -> Signoff:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def register(self, tool: Tool) -> Tool:
        """Make a tool known by name: to ``run.call("name", ...)`` and to ``reconcile()``."""
        self.tools[tool.name] = tool
        return tool

    def requires_approval(self, *, name: str | None = None, preview: PreviewFn | None = None,
                          guard: GuardFn | None = None, reconcile: ReconcileFn | None = None,
                          evidence: EvidenceFn | None = None,
                          approvers: Sequence[str] | None = None,
                          ttl_minutes: float | None = None,
                          ) -> Callable[[Callable[..., Any]], Gated]:
        """Gate a function: calling it inside ``async with so.run(...)`` does the whole round.

        The wrapper is always ``async`` (it waits for a person); the function itself may be
        plain or async. Its arguments, bound by name, are the call's arguments.
        """

        def decorate(fn: Callable[..., Any]) -> Gated:
            tool = self.register(Tool(name=name or fn.__name__, execute=fn, preview=preview,
                                      guard=guard, reconcile=reconcile, evidence=evidence))
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            async def gated(*args: Any, **kwargs: Any) -> Any:
                run = current_run.get()
                if run is None:
                    raise errors.NoRun(f"{tool.name} needs approval: call it inside "
                                       "`async with so.run(...)`")
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return await run.call(tool.name, dict(bound.arguments), approvers=approvers,
                                      ttl_minutes=ttl_minutes)

            gated.__signoff_tool__ = tool.name  # type: ignore[attr-defined]
            return gated

        return decorate

    async def start_run(self, *, requester: str, title: str, limits: Limits | None = None,
                        idempotency_key: str | None = None,
                        requires: Sequence[str] = ()) -> Run:
        """Create the external run, or get it back: the same key and body give the same run."""
        body = {"external": True, "requester": requester, "title": title,
                "idempotency_key": idempotency_key or f"client-{secrets.token_urlsafe(16)}",
                "limits": (limits or Limits()).model_dump(exclude_none=True)}
        _, info = await self.api.request("POST", "/runs", json=body)
        return Run(self.api, RunInfo.model_validate(info), self.tools, requires)

    @asynccontextmanager
    async def run(self, *, requester: str, title: str, limits: Limits | None = None,
                  idempotency_key: str | None = None,
                  requires: Sequence[str] = ()) -> AsyncIterator[Run]:
        """A run for the block; see ``Run.close`` for how the block's end ends the run.

        Pass ``idempotency_key`` so that an agent restarted mid-run gets the same run back
        (and its calls' recorded results, instead of second executions).
        """
        run = await self.start_run(requester=requester, title=title, limits=limits,
                                   idempotency_key=idempotency_key, requires=requires)
        with running(run):
            try:
                yield run
            except BaseException as exc:
                await run.close(exc)
                raise
            await run.close(None)

    async def unknown_calls(self) -> list[Call]:
        _, body = await self.api.request("GET", "/calls", params={"status": "unknown"})
        listed = body.get("calls", []) if isinstance(body, dict) else body
        return [Call.model_validate(item) for item in listed or []]

    async def reconcile(self, tools: Mapping[str, ReconcileFn] | None = None) -> list[Call]:
        """Settle this key's ``unknown`` calls with each tool's ``reconcile``; call it at start.

        A call found done is settled ``succeeded`` with what reconcile found, one found not
        done is settled ``failed``; one nobody can tell about is left ``unknown`` (the run
        fails ``outcome_unknown`` if nobody settles it). Returns the calls as left.
        """
        left: list[Call] = []
        for call in await self.unknown_calls():
            name = call.tool or ""
            tool = self.tools.get(name) or Tool(name=name)
            if tools and name in tools:
                tool = tool.with_overrides(reconcile=tools[name])
            if call.run_id is None:
                left.append(call)
                continue
            try:
                await settle_unknown(self.api, call.run_id, call, tool, call.args or {})
            except errors.CallFailed:
                left.append(call.model_copy(update={"status": CallStatus.failed}))
            except errors.OutcomeUnknown:
                log.warning("unknown outcome left for a person",
                            extra={"action": "reconcile", "call_id": call.call_id})
                left.append(call)
            else:
                left.append(call.model_copy(update={"status": CallStatus.succeeded}))
        return left
