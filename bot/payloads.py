"""The requests signoff handles, as an allow-list checked before Bolt sees a body.

signoff answers exactly these, and ``problem`` says why anything else is not one
of them (the door answers that with a 400):

- ``/signoff`` slash commands;
- ``block_actions`` whose every action is the card's Approve or Decline button;
- ``view_submission`` of the decline-reason modal;
- Slack's ``ssl_check`` of the command URL (Bolt answers it).

Within those, every field Bolt or a listener reads must be there with the type
they read it as, and nothing may be nested deeper than :data:`MAX_DEPTH`
(Python's parser and Bolt recurse, and a deep enough body is a RecursionError).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt.request.internals import parse_body

from bot import ids

#: Deepest nesting of objects and lists a handled payload may have; Slack's own
#: (a card's blocks with rich text inside a block_actions) stay well under it.
MAX_DEPTH = 64
ACTIONS = frozenset({ids.APPROVE_ACTION, ids.DECLINE_ACTION})
CALLBACKS = frozenset({ids.DECLINE_REASON_CALLBACK})

Problem = Callable[[dict[str, Any]], str | None]


def problem(raw: bytes, content_type: str | None) -> str | None:
    """Why this body is not a request signoff handles; None when it is one."""
    try:
        body = parse_body(raw.decode("utf-8"), content_type)
    except ValueError:  # not UTF-8, or a payload that is not JSON
        return "not a Slack payload"
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH}"
    if not isinstance(body, dict):
        return "payload is not an object"
    if _depth(body) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH}"
    if body.get("ssl_check") == "1":
        return None
    envelope = _envelope(body)
    if envelope is not None:
        return envelope
    if "command" in body:
        return _command(body)
    kind = body.get("type")
    check = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if check is None:
        return f"not a request signoff handles (type {str(kind)[:40]!r})"
    return check(body)


def is_command(raw: bytes, content_type: str | None) -> bool:
    """A slash command: the one kind of request a replay could repeat.

    A click or a decline-reason submission carries a single-use pending token,
    so its replay is answered "already decided" and changes nothing; it is not
    recorded, which keeps the click's ack free of a database write.
    """
    if content_type != "application/x-www-form-urlencoded":
        return False
    try:
        body = parse_body(raw.decode("utf-8"), content_type)
    except (ValueError, RecursionError):
        return False
    return isinstance(body, dict) and "command" in body


def _depth(value: Any) -> int:
    """How deep objects and lists nest in ``value``, without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list))
    return deepest


#: Envelope keys Bolt reads (building the context, routing, logging an unhandled
#: request) without checking their type, and the types Slack sends them as.
_OBJECT_OR_ID = (dict, str, type(None))
_ENVELOPE: dict[str, tuple[type, ...]] = {
    "type": (str, type(None)),
    "team": _OBJECT_OR_ID, "enterprise": _OBJECT_OR_ID, "user": _OBJECT_OR_ID,
    "channel": _OBJECT_OR_ID,
    "view": (dict,), "container": (dict,), "message": (dict,), "previous_message": (dict,),
    "event": (dict,), "item": (dict,), "assistant_thread": (dict,), "function_data": (dict,),
    "authorizations": (list,), "actions": (list,), "response_urls": (list,),
}
_LISTS_OF_OBJECTS = ("authorizations", "actions", "response_urls")


def _envelope(body: dict[str, Any]) -> str | None:
    for key, types in _ENVELOPE.items():
        if key in body and not isinstance(body[key], types):
            return f"{key} is a {type(body[key]).__name__}"
    for key in _LISTS_OF_OBJECTS:
        if not all(isinstance(item, dict) for item in body.get(key) or []):
            return f"{key} holds something other than objects"
    return None


def _command(body: dict[str, Any]) -> str | None:
    for key in ("command", "user_id", "response_url"):
        if not isinstance(body.get(key), str):
            return f"command without {key}"
    if body["command"] != ids.COMMAND:
        return "not a command signoff has"
    return None


def _user(body: dict[str, Any]) -> str | None:
    user = body.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str):
        return "no user id"
    return None


def _block_actions(body: dict[str, Any]) -> str | None:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return "no actions"
    if not all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions):
        return "an action without an action_id"
    if not all(a["action_id"] in ACTIONS for a in actions):
        return "an action signoff has no button for"
    for key in ("trigger_id", "response_url"):
        if not isinstance(body.get(key), str):
            return f"no {key}"
    return _user(body)


def _view_submission(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    if not isinstance(view, dict) or not isinstance(view.get("callback_id"), str):
        return "no view callback_id"
    if view["callback_id"] not in CALLBACKS:
        return "a view signoff did not open"
    if not isinstance(view.get("type"), str):  # Bolt's matchers index view["type"]
        return "no view type"
    if not isinstance(view.get("private_metadata", ""), str):
        return "private_metadata is not text"
    state = view.get("state", {})
    if not isinstance(state, dict) or not _nested_dicts(state.get("values", {}), depth=3):
        return "view state is not block -> action -> element"
    return _user(body)


def _nested_dicts(value: Any, depth: int) -> bool:
    if depth == 0:
        return True
    return isinstance(value, dict) and all(_nested_dicts(v, depth - 1) for v in value.values())


_BY_TYPE: dict[str, Problem] = {
    "block_actions": _block_actions,
    "view_submission": _view_submission,
}
