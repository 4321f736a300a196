"""An MCP server in front of another: gated tools are approved in signoff before they run.

The gateway lists the upstream server's tools as they are. A call to a gated tool (one
matching a ``--gate`` glob) becomes a signoff call in a run of its own, whose card shows
the tool's arguments; the gateway waits for the decision, sending progress notifications
meanwhile, and calls the upstream tool under the execution claim, so it runs once. A
decline, an expiry or a block is answered with a tool error result carrying the reason.
Ungated tools pass straight through.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import shlex
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from signoff_client import errors
from signoff_client.client import Signoff

#: How often a waiting call tells the MCP client it is still waiting for a person.
PROGRESS_EVERY_SECONDS = 5.0


@dataclass(frozen=True)
class Gate:
    """Which tools need approval, and who is asked."""

    globs: Sequence[str]
    requester: str
    ttl_minutes: float | None = None  #: how long a card waits; None: the server's default

    def covers(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, glob) for glob in self.globs)


def refusal_text(exc: errors.SignoffError) -> str:
    """What the agent reads when nothing ran; the person's reason is quoted as data."""
    if isinstance(exc, errors.Declined):
        by = f" by {exc.by}" if exc.by else ""
        reason = f": {exc.reason!r}" if exc.reason else " (no reason given)"
        return f"signoff: declined{by}{reason}. The tool did not run."
    if isinstance(exc, errors.Expired):
        return "signoff: nobody decided in time; the request expired. The tool did not run."
    if isinstance(exc, errors.Blocked):
        return f"signoff: blocked ({exc.code}). The tool did not run."
    if isinstance(exc, errors.Cancelled):
        return "signoff: the run was cancelled. The tool did not run."
    return f"signoff: not run ({type(exc).__name__})."


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class Gateway:
    def __init__(self, upstream: ClientSession, signoff: Signoff, gate: Gate) -> None:
        self.upstream, self.signoff, self.gate = upstream, signoff, gate

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
        waiting = asyncio.create_task(self._report_waiting(ctx))
        try:
            return await self._gated(params.name, args)
        finally:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting

    async def _gated(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        async def execute(**arguments: Any) -> dict[str, Any]:
            result = await self.upstream.call_tool(name, arguments)
            dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True,
                                                       exclude_none=True)
            return dumped

        # The run answers only if the tool ran: a refused call leaves it failed, for the record.
        async with self.signoff.run(requester=self.gate.requester,
                                    title=f"MCP tool call: {name}", requires=[name]) as run:
            try:
                recorded = await run.call(name, args, execute=execute,
                                           ttl_minutes=self.gate.ttl_minutes)
            except errors.NotApproved as exc:
                run.answer = refusal_text(exc)
                return error_result(run.answer)
            except errors.CallFailed as exc:
                run.answer = f"signoff: {name} failed"
                return error_result(f"{run.answer}: {exc}")
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
        raise ValueError("--upstream needs a command that starts an MCP server")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def serve(command: str, gate: Gate, *, url: str, api_key: str,
                http_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Run the gateway on stdio, or on streamable HTTP at ``/mcp`` when ``http_port`` is set."""
    async with upstream_session(command) as upstream, Signoff(url, api_key) as signoff:
        server = Gateway(upstream, signoff, gate).server()
        if http_port is None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        import uvicorn

        app = server.streamable_http_app(host=host)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=http_port,
                                            log_level="warning")).serve()
