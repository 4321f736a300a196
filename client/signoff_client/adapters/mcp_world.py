"""The upstream MCP server's read-only tools as the preview and the guard of gated calls.

``--preview 'refund_*=preview_refund'`` calls ``preview_refund`` with a gated call's own
arguments: its result joins the arguments on the card, and is rendered again at execution,
so an approval of a world that has since changed is answered ``changed``. ``--guard
'refund_*=check_refund'`` calls ``check_refund`` just before the execution claim; a tool
error, or a structured result whose ``ok`` is not true, blocks the call with its message.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from signoff_client.models import JsonObject, Preview, default_preview
from signoff_client.tools import Guard, GuardFn, PreviewFn

log = logging.getLogger("signoff_client")

#: The API's bounds on a guard's verdict; a longer message would get the block refused.
GUARD_CODE_MAX = 100
GUARD_MESSAGE_MAX = 1000


class SetupError(Exception):
    """The gateway's flags do not fit the upstream server; nothing was started."""


class HelperFailed(Exception):
    """A preview tool answered with a tool error, so there is no preview to show."""

    def __init__(self, tool: str, text: str) -> None:
        super().__init__(f"the preview tool {tool} failed: {text!r}")
        self.tool = tool


@dataclass(frozen=True)
class Helper:
    """``GLOB=TOOL``: the upstream tool ``tool`` serves the gated tools matching ``glob``."""

    glob: str
    tool: str

    @classmethod
    def parse(cls, text: str) -> Helper:
        glob, equals, tool = text.partition("=")
        if not equals or not glob.strip() or not tool.strip():
            raise ValueError(f"expected GLOB=TOOL, e.g. 'refund_*=preview_refund', got {text!r}")
        return cls(glob.strip(), tool.strip())

    def serves(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.glob)


def text_of(result: types.CallToolResult) -> str:
    """A tool result's text blocks, joined: what a person or a model reads of it."""
    return " ".join(block.text for block in result.content
                    if isinstance(block, types.TextContent))


def world_preview(name: str, args: JsonObject, result: types.CallToolResult) -> Preview:
    """The arguments, one field each, then the preview tool's structured fields, or its text."""
    base = default_preview(name, args)
    structured = result.structured_content
    if isinstance(structured, dict) and structured:
        found = [(str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
                 for k, v in structured.items()]
        return Preview(title=base.title, fields=[*base.fields, *found])
    return Preview(title=base.title, fields=base.fields, body=text_of(result) or None)


def verdict(tool: str, result: types.CallToolResult) -> Guard:
    """Ok, unless the guard tool failed or said ``"ok"`` is anything but true."""
    structured = result.structured_content
    said: dict[str, Any] = structured if isinstance(structured, dict) else {}
    if not result.is_error and said.get("ok", True) is True:
        return Guard.passed()
    message = said.get("message")
    text = message if isinstance(message, str) and message else text_of(result)
    return Guard.blocked(tool[:GUARD_CODE_MAX],
                         (text or f"{tool} said not ok")[:GUARD_MESSAGE_MAX])


class World:
    """Previews and guards for gated tools, rendered by the upstream's own tools."""

    def __init__(self, upstream: ClientSession, previews: Sequence[Helper],
                 guards: Sequence[Helper]) -> None:
        self.upstream, self.previews, self.guards = upstream, previews, guards

    def preview_for(self, name: str) -> PreviewFn | None:
        tool = _first(self.previews, name)
        if tool is None:
            return None

        async def render(args: JsonObject) -> Preview:
            result = await self.upstream.call_tool(tool, args)
            if result.is_error:
                raise HelperFailed(tool, text_of(result))
            return world_preview(name, args, result)

        return render

    def guard_for(self, name: str) -> GuardFn | None:
        tool = _first(self.guards, name)
        if tool is None:
            return None

        async def check(args: JsonObject) -> Guard:
            return verdict(tool, await self.upstream.call_tool(tool, args))

        return check


def _first(helpers: Sequence[Helper], name: str) -> str | None:
    return next((h.tool for h in helpers if h.serves(name)), None)


def check_helpers(flag: str, helpers: Sequence[Helper], tools: Sequence[str],
                  gated: Sequence[str]) -> None:
    """Each helper must be an upstream tool, not gated itself, serving some gated tool."""
    for helper in helpers:
        said = f"{flag} {helper.glob}={helper.tool}"
        if helper.tool not in tools:
            raise SetupError(f"{said}: the upstream server has no tool {helper.tool!r} "
                             f"(it has: {', '.join(sorted(tools)) or 'none'})")
        if helper.tool in gated:
            raise SetupError(f"{said}: {helper.tool} matches a --gate glob; a preview or "
                             "guard tool only reads, and must not need approval itself")
        if not any(helper.serves(name) for name in gated):
            raise SetupError(f"{said}: no gated upstream tool matches {helper.glob!r} "
                             f"(gated: {', '.join(sorted(gated)) or 'none'})")


async def tool_names(session: ClientSession) -> list[str]:
    """Every tool the upstream lists now; SetupError if it cannot list them."""
    names: list[str] = []
    cursor: str | None = None
    while True:
        try:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        except MCPError as exc:
            raise SetupError(f"the upstream server could not list its tools: {exc}") from exc
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


def tools_may_change(session: ClientSession) -> bool:
    """The upstream says its tool list may change (``tools.listChanged``)."""
    started = session.initialize_result
    listed = started.capabilities.tools if started is not None else None
    return bool(listed is not None and listed.list_changed)


def check_globs(globs: Sequence[str], tools: Sequence[str], *, may_change: bool) -> None:
    """Each --gate glob must match an upstream tool: a typo would leave the tool it meant
    ungated. An upstream whose tools may change later is only warned about: the glob gates
    what it matches whenever that appears."""
    for glob in globs:
        if any(fnmatch.fnmatchcase(name, glob) for name in tools):
            continue
        listed = ", ".join(sorted(tools)) or "none"
        said = f"--gate {glob}: matches no upstream tool (it has: {listed})"
        if not may_change:
            raise SetupError(f"{said}, so it would gate nothing")
        log.warning("%s yet; the upstream's tool list may change", said,
                    extra={"action": "gate_matches_nothing_yet", "glob": glob})
