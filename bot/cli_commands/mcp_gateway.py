"""`signoff mcp-gateway --upstream CMD --gate GLOB ...`: an MCP server whose gated tools
are approved in signoff before the upstream server runs them."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from bot.cli_commands.common import EXIT_NOT_SET_UP, EXIT_OK, add, fail, positive_int


def _setting(given: str | None, env: str, flag: str) -> str:
    value = given or os.environ.get(env, "")
    if not value:
        fail(f"{flag} (or {env}) is required", EXIT_NOT_SET_UP)
    return value


def positive_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of minutes, got {text!r}")
    return value


def helper_rule(text: str) -> Any:
    """`GLOB=TOOL` for --preview and --guard (parsed by the adapter, which may be missing)."""
    try:
        from signoff_client.adapters.mcp_world import Helper
    except ImportError:
        return text  # run_gateway says what to install
    try:
        return Helper.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group``, however deep the task groups nested it."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found


def run_gateway(args: argparse.Namespace) -> int:
    try:
        from signoff_client.adapters import mcp_gateway
        from signoff_client.adapters.mcp_world import SetupError
    except ImportError:
        fail("the MCP gateway needs the mcp package: pip install './client[mcp]' "
             "(from a checkout of signoff)",
             EXIT_NOT_SET_UP)
    url = _setting(args.url, "SIGNOFF_URL", "--url")
    api_key = _setting(args.api_key, "SIGNOFF_API_KEY", "--api-key")
    requester = _setting(args.requester, "SIGNOFF_REQUESTER", "--requester")
    if not args.gate:  # a gateway gating nothing would pass every call through unasked
        fail("--gate GLOB is required: without it no tool would need approval",
             EXIT_NOT_SET_UP)
    if not args.upstream.strip():
        fail("--upstream needs the command that starts the upstream MCP server",
             EXIT_NOT_SET_UP)
    gate = mcp_gateway.Gate(globs=tuple(args.gate), requester=requester,
                            ttl_minutes=args.ttl_minutes, previews=tuple(args.preview),
                            guards=tuple(args.guard))
    try:
        asyncio.run(mcp_gateway.serve(args.upstream, gate, url=url, api_key=api_key,
                                      http_port=args.http, host=args.host))
    except* SetupError as group:
        fail(str(_first(group)), EXIT_NOT_SET_UP)
    return EXIT_OK


def add_parser(commands: Any) -> None:
    gateway = add(commands, "mcp-gateway", "serve an MCP server's tools, gated by signoff",
                  "Serve the tools of the MCP server that --upstream starts (over stdio, or "
                  "over streamable HTTP at /mcp with --http). A call to a tool matching a "
                  "--gate glob is asked for in Slack, one run per call (or per "
                  "_meta['signoff/idempotency_key'] the client sends), with the tool's "
                  "arguments on the card; it runs once, after approval. A decline, an expiry "
                  "or a block is answered with a tool error carrying the reason. Other tools "
                  "pass through.")
    gateway.add_argument("--upstream", required=True, metavar="COMMAND",
                         help="the command that starts the upstream MCP server (stdio)")
    gateway.add_argument("--gate", action="append", default=[], metavar="GLOB",
                         help="tools needing approval, e.g. 'refund_*' (repeatable; at least "
                         "one; each must match a tool the upstream lists)")
    gateway.add_argument("--preview", action="append", default=[], type=helper_rule,
                         metavar="GLOB=TOOL",
                         help="a read-only upstream TOOL, called with a gated call's "
                         "arguments, whose result joins them on the card and is rendered "
                         "again at execution: a changed world asks again (repeatable; the "
                         "first match wins)")
    gateway.add_argument("--guard", action="append", default=[], type=helper_rule,
                         metavar="GLOB=TOOL",
                         help="a read-only upstream TOOL, called with a gated call's "
                         "arguments just before it runs: a tool error, or a result whose "
                         "'ok' is not true, blocks it with its message (repeatable)")
    gateway.add_argument("--url", help="signoff's URL (default: $SIGNOFF_URL)")
    gateway.add_argument("--api-key", help="an API key (default: $SIGNOFF_API_KEY)")
    gateway.add_argument("--requester", help="the Slack user asked to approve "
                         "(default: $SIGNOFF_REQUESTER)")
    gateway.add_argument("--ttl-minutes", type=positive_minutes, metavar="MINUTES",
                         help="how long a card waits for a decision (default: the server's)")
    gateway.add_argument("--http", type=positive_int, metavar="PORT",
                         help="serve streamable HTTP on PORT instead of stdio")
    gateway.add_argument("--host", default="127.0.0.1", help="the host --http binds")
    gateway.set_defaults(call=run_gateway)
