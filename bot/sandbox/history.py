"""The stand-in's reads of past messages: ``conversations.history`` and ``.replies``.

Like Slack, a message's metadata is returned only with ``include_all_metadata``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.sandbox.records import JSON, Message, SlackError, channel_id, message_json

if TYPE_CHECKING:
    from bot.sandbox.workspace import Workspace


def channel_history(ws: Workspace, args: JSON) -> JSON:
    """A channel's top-level messages, newest first."""
    channel = _known_channel(ws, args)
    found = [m for m in ws.messages(channel) if m.thread_ts in (None, m.ts)]
    return _page(found, args, newest_first=True)


def thread_replies(ws: Workspace, args: JSON) -> JSON:
    """A thread: its root, then its replies, oldest first."""
    channel = _known_channel(ws, args)
    root = str(args.get("ts") or "")
    found = [m for m in ws.messages(channel) if root in (m.ts, m.thread_ts)]
    if not any(m.ts == root for m in found):
        raise SlackError("thread_not_found")
    return _page(found, args, newest_first=False)


def _known_channel(ws: Workspace, args: JSON) -> str:
    # The stand-in makes channels on first post: one never posted to just has no messages.
    channel = channel_id(str(args.get("channel") or ""))
    if not channel:
        raise SlackError("channel_not_found")
    return channel


def _page(found: list[Message], args: JSON, *, newest_first: bool) -> JSON:
    with_metadata = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
    ordered = sorted(found, key=lambda m: m.ts, reverse=newest_first)
    limit = int(args.get("limit") or 100)
    return {
        "messages": [message_json(m, with_metadata=with_metadata) for m in ordered[:limit]],
        "has_more": len(ordered) > limit,
    }
