"""An MCP server in front of another: gated tools are approved in signoff before they run.

The gateway lists the upstream server's tools as they are. A call to a gated tool (one
matching a ``--gate`` glob) becomes a signoff call in a run of its own, whose card shows
the tool's arguments (and what its ``--preview`` tool reads of the world); the gateway waits
for the decision, sending progress notifications meanwhile, and calls the upstream tool
under the execution claim, so it runs once. A decline, an expiry or a block is answered
with a tool error result carrying the reason. Ungated tools pass straight through.

MCP gives a call no identity of its own: two equal calls may be two refunds meant. So each
call is its own run, unless the client names it with ``_meta["signoff/idempotency_key"]``:
the same key again is the same run and call, so a resumed agent gets the recorded result
(or the refusal) instead of a second execution. The named run's title carries a fingerprint
of the tool and its arguments, so the server refuses the same key with another tool or other
arguments: that is answered with a tool error, and nothing is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import logging
import shlex
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from signoff_client import errors
from signoff_client.adapters.mcp_world import (
    Helper,
    HelperFailed,
    SetupError,
    World,
    check_globs,
    check_helpers,
    text_of,
    tool_names,
    tools_may_change,
)
from signoff_client.client import Signoff
from signoff_client.runs import Run, default_call_id

log = logging.getLogger("signoff_client")

#: How often a waiting call tells the MCP client it is still waiting for a person.
PROGRESS_EVERY_SECONDS = 5.0
#: The ``_meta`` key naming a call, so that asking again is the same call.
IDEMPOTENCY_META_KEY = "signoff/idempotency_key"
IDEMPOTENCY_KEY_MAX = 180


@dataclass(frozen=True)
class Gate:
    """Which tools need approval, who is asked, and which tools render their previews."""

    globs: Sequence[str]
    requester: str
    ttl_minutes: float | None = None  #: how long a card waits; None: the server's default
    previews: Sequence[Helper] = ()
    guards: Sequence[Helper] = ()

    def covers(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, glob) for glob in self.globs)


class UpstreamToolError(Exception):
    """The upstream tool ran and answered with a tool error: the call failed."""

    def __init__(self, result: types.CallToolResult) -> None:
        super().__init__(text_of(result) or "the tool reported an error")
        self.result = result


def refusal_text(exc: Exception) -> str:
    """What the agent reads when nothing ran; the person's reason is quoted as data."""
    if isinstance(exc, errors.Declined):
        by = f" by {exc.by}" if exc.by else ""
        reason = f": {exc.reason!r}" if exc.reason else " (no reason given)"
        return f"signoff: declined{by}{reason}. The tool did not run."
    if isinstance(exc, errors.Expired):
        return "signoff: nobody decided in time; the request expired. The tool did not run."
    if isinstance(exc, errors.Blocked):
        return f"signoff: blocked ({exc.code}): {exc.reason!r}. The tool did not run."
    if isinstance(exc, errors.Cancelled):
        return "signoff: the run was cancelled. The tool did not run."
    if isinstance(exc, HelperFailed | errors.ApiError | errors.Unavailable):
        return f"signoff: {exc}. The tool did not run."
    return f"signoff: not run ({type(exc).__name__}: {exc})."


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def given_key(params: types.CallToolRequestParams) -> str | None:
    """The key the client named the call with; None: an unnamed call, a run of its own."""
    given = (params.meta or {}).get(IDEMPOTENCY_META_KEY)
    if given is None:
        return None
    if not isinstance(given, str) or not 0 < len(given) <= IDEMPOTENCY_KEY_MAX:
        raise ValueError(f"_meta[{IDEMPOTENCY_META_KEY!r}] must be a string of 1 to "
                         f"{IDEMPOTENCY_KEY_MAX} characters")
    return given


@dataclass(frozen=True)
class Identity:
    """Where a gated call lives in signoff: its run's key and title, and its call id."""

    run_key: str | None
    title: str
    call_id: str

    @classmethod
    def of(cls, name: str, args: dict[str, Any], given: str | None) -> Identity:
        if given is None:
            return cls(None, f"MCP tool call: {name}", default_call_id(name, args))
        # The fingerprint is part of the run's body: the same key with another tool or
        # other arguments is refused by the server instead of becoming a second call.
        fingerprint = default_call_id(name, args).removeprefix(f"{name}-")
        named = hashlib.sha256(given.encode()).hexdigest()[:32]
        return cls(f"mcp:{given}", f"MCP tool call: {name} (arguments {fingerprint})",
                   f"mcp-{named}")


#: The upstream's own words go into the run's answer; the API refuses an answer over 20,000
#: characters, which would leave the run open forever.
ANSWER_MAX = 2_000


def clipped(answer: str) -> str:
    return answer if len(answer) <= ANSWER_MAX else answer[:ANSWER_MAX - 1] + "…"


def another_call_text(given: str) -> str:
    return (f"signoff: {IDEMPOTENCY_META_KEY} {given!r} was used before for another call "
            "(another tool or other arguments, or another requester); that call is left as "
            "it was. This one was not asked for, and the tool did not run.")


class Gateway:
    def __init__(self, upstream: ClientSession, signoff: Signoff, gate: Gate) -> None:
        self.upstream, self.signoff, self.gate = upstream, signoff, gate
        self.world = World(upstream, gate.previews, gate.guards)

    def server(self) -> Server[Any]:
        return Server("signoff-mcp-gateway", on_list_tools=self.list_tools,
                      on_call_tool=self.call_tool)

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await self.upstream.list_tools(params=params)

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        if not self.gate.covers(params.name):
            return await self.upstream.call_tool(params.name, args)
        try:
            given = given_key(params)
        except ValueError as exc:
            return error_result(f"signoff: {exc}. Nothing was asked; the tool did not run.")
        waiting = asyncio.create_task(self._report_waiting(ctx))
        try:
            return await self._gated(params.name, args, given)
        finally:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting

    async def _gated(self, name: str, args: dict[str, Any],
                     given: str | None) -> types.CallToolResult:
        named = Identity.of(name, args, given)
        try:
            run = await self.signoff.start_run(
                requester=self.gate.requester, title=named.title,
                idempotency_key=named.run_key, requires=[name])
        except errors.SignoffError as exc:
            if given is not None and isinstance(exc, errors.ApiError) \
                    and exc.code == "idempotency_conflict":
                return error_result(another_call_text(given))
            return error_result(f"signoff: {exc}. Nothing was asked; the tool did not run.")
        try:
            outcome = await self._call(run, name, args, named.call_id)
        except BaseException:
            if given is None:  # nobody can come back for this call: its card must not stay open
                with anyio.CancelScope(shield=True), contextlib.suppress(errors.SignoffError):
                    await run.cancel()
            raise
        try:
            await run.close(None)  # answered only if the tool ran; else failed, for the record
        except errors.SignoffError as exc:
            log.warning("the gated call's run could not be finished",
                        extra={"action": "mcp_finish", "run_id": run.id, "problem": str(exc)})
        return outcome

    async def _call(self, run: Run, name: str, args: dict[str, Any],
                    call_id: str) -> types.CallToolResult:
        """The round for one gated call, as the MCP client should read it; sets the answer."""

        async def execute(**arguments: Any) -> dict[str, Any]:
            result = await self.upstream.call_tool(name, arguments)
            if result.is_error:
                raise UpstreamToolError(result)
            dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True,
                                                       exclude_none=True)
            return dumped

        try:
            recorded = await run.call(name, args, call_id=call_id, execute=execute,
                                      preview=self.world.preview_for(name),
                                      guard=self.world.guard_for(name),
                                      ttl_minutes=self.gate.ttl_minutes)
        except UpstreamToolError as exc:
            run.answer = clipped(f"{name} ran and failed: {exc}")
            return exc.result  # what the tool said, as it said it
        except errors.CallFailed as exc:
            said = exc.result.get("message") if isinstance(exc.result, dict) else exc.result
            run.answer = clipped(f"{name} ran before and failed; it was not run again: {said}")
            return error_result(f"signoff: {run.answer}")
        except errors.OutcomeUnknown as exc:
            run.answer = (f"{name} was interrupted while it ran; whether it took effect is "
                          f"unknown (idempotency key {exc.idempotency_key}), so it was not "
                          "run again")
            return error_result(f"signoff: {run.answer}.")
        except errors.ResultNotRecorded as exc:
            run.answer = f"{name} ran; signoff could not record its result"
            if isinstance(exc.result, dict):
                return types.CallToolResult.model_validate(exc.result)
            return error_result(f"signoff: {run.answer}.")
        except (errors.SignoffError, HelperFailed) as exc:
            run.answer = refusal_text(exc)
            return error_result(run.answer)
        run.answer = f"{name} ran"
        return types.CallToolResult.model_validate(recorded)

    async def _report_waiting(self, ctx: ServerRequestContext[Any]) -> None:
        ticks = 0
        while True:
            ticks += 1
            await ctx.session.report_progress(ticks, None, "waiting for approval in signoff")
            await asyncio.sleep(PROGRESS_EVERY_SECONDS)


@asynccontextmanager
async def upstream_session(command: str) -> AsyncIterator[ClientSession]:
    """The upstream MCP server, started from ``command`` and spoken to over stdio."""
    argv = shlex.split(command)
    if not argv:
        raise SetupError("--upstream needs a command that starts an MCP server")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def check_gate(session: ClientSession, gate: Gate) -> None:
    """Raise SetupError unless every --gate glob, --preview and --guard fits the upstream."""
    tools = await tool_names(session)
    check_globs(gate.globs, tools, may_change=tools_may_change(session))
    gated = [name for name in tools if gate.covers(name)]
    check_helpers("--preview", gate.previews, tools, gated)
    check_helpers("--guard", gate.guards, tools, gated)


async def serve(command: str, gate: Gate, *, url: str, api_key: str,
                http_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Run the gateway on stdio, or on streamable HTTP at ``/mcp`` when ``http_port`` is set."""
    async with upstream_session(command) as upstream, Signoff(url, api_key) as signoff:
        await check_gate(upstream, gate)
        server = Gateway(upstream, signoff, gate).server()
        if http_port is None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        import uvicorn

        app = server.streamable_http_app(host=host)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=http_port,
                                            log_level="warning")).serve()
