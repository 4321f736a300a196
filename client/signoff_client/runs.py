"""A run seen from the agent's side: gated calls inside it, and how it ends."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from signoff_client import errors
from signoff_client.models import JsonObject, RunInfo
from signoff_client.rounds import Ask, PermittedFn, Round
from signoff_client.tools import EvidenceFn, ExecuteFn, GuardFn, PreviewFn, ReconcileFn, Tool
from signoff_client.transport import Api


def default_call_id(tool: str, args: JsonObject) -> str:
    """The same tool with the same arguments in the same run is the same call.

    That is what makes a restarted agent join its earlier round instead of asking
    (and perhaps executing) again. Pass ``call_id`` to tell two equal calls apart.
    """
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    digest = hashlib.sha256(f"{tool}\n{canonical}".encode()).hexdigest()[:24]
    return f"{tool}-{digest}"


class Run:
    """An external run. ``answer`` is what ``finish`` reports when the ``async with`` ends."""

    def __init__(self, api: Api, info: RunInfo, tools: Mapping[str, Tool],
                 requires: Sequence[str]) -> None:
        self._api, self._tools = api, tools
        self.info = info
        self.requires = list(requires)
        self.answer: str | None = None
        self.closed = False

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def api(self) -> Api:
        return self._api

    async def call(self, tool: str | ExecuteFn, args: JsonObject | None = None, *,
                   call_id: str | None = None, execute: ExecuteFn | None = None,
                   preview: PreviewFn | None = None, guard: GuardFn | None = None,
                   reconcile: ReconcileFn | None = None, evidence: EvidenceFn | None = None,
                   approvers: Sequence[str] | None = None, ttl_minutes: float | None = None,
                   spend_usd: float | None = None, permitted: PermittedFn | None = None) -> Any:
        """Ask for approval and, once approved and re-checked, run the tool exactly once.

        ``tool`` is a registered tool's name or a function (named after itself). Returns
        what the function returned, or the recorded result when the call had already run.
        Raises Declined, Expired, Blocked, Cancelled or NoLongerPermitted when nothing ran.
        """
        spec = self._resolve(tool).with_overrides(
            execute=execute, preview=preview, guard=guard, reconcile=reconcile,
            evidence=evidence)
        arguments = dict(args or {})
        ask = Ask(run_id=self.id, call_id=call_id or default_call_id(spec.name, arguments),
                  tool=spec, args=arguments, approvers=list(approvers) if approvers else None,
                  ttl_minutes=ttl_minutes, spend_usd=spend_usd, permitted=permitted)
        return await Round(self._api, ask).perform()

    def _resolve(self, tool: str | ExecuteFn) -> Tool:
        if isinstance(tool, str):
            return self._tools.get(tool) or Tool(name=tool)
        name = getattr(tool, "__signoff_tool__", None) or tool.__name__
        registered = self._tools.get(name)
        return registered if registered is not None else Tool(name=name, execute=tool)

    async def finish(self, answer: str | None = None,
                     requires: Sequence[str] | None = None) -> RunInfo:
        """End the run: ``answered`` only if every required tool succeeded, else ``failed``."""
        body = {"answer": answer if answer is not None else (self.answer or ""),
                "requires": list(requires if requires is not None else self.requires)}
        _, info = await self._api.request("POST", f"/runs/{self.id}/finish", json=body)
        return self._closed(info)

    async def cancel(self) -> RunInfo:
        _, info = await self._api.request("POST", f"/runs/{self.id}/cancel", json={})
        return self._closed(info)

    async def refresh(self) -> RunInfo:
        _, info = await self._api.request("GET", f"/runs/{self.id}")
        self.info = RunInfo.model_validate(info)
        return self.info

    async def close(self, failure: BaseException | None) -> None:
        """How ``async with so.run(...)`` ends, unless the body already finished the run.

        A normal exit finishes the run (one that has already ended, halted by an expiry
        say, is left as it is; ``info`` says how it ended). An ``Exception`` escaping the
        block cancels it: the agent gave up, so nothing it asked for may still run. A
        ``BaseException`` (the task cancelled, Ctrl-C, SystemExit) leaves the run as it is,
        so a restarted agent can pick it up with the same ``idempotency_key``.
        """
        if self.closed:
            return
        if failure is None:
            try:
                await self.finish()
            except errors.ApiError as exc:
                if exc.code != "run_not_running":
                    raise
                await self.refresh()  # it ended already (halted, say, by an expiry)
        elif isinstance(failure, Exception):
            try:
                await self.cancel()
            except errors.SignoffError:
                pass  # the agent's own exception is the one worth raising

    def _closed(self, info: Any) -> RunInfo:
        self.closed = True
        if isinstance(info, dict) and "id" in info:
            self.info = RunInfo.model_validate(info)
        return self.info
