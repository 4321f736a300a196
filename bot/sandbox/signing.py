"""Requests as Slack sends them: signed, with the payload shapes Bolt expects.

Used by the tests and by the sandbox page to drive the real Bolt app with
signature verification on. The signature is computed by slack_sdk's own
``SignatureVerifier`` so it cannot drift from what Bolt checks.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from bot.sandbox import fake_slack

JSON = dict[str, Any]
#: state.values of a view or message: block_id -> action_id -> element state.
StateValues = Mapping[str, Mapping[str, Mapping[str, Any]]]
P = ParamSpec("P")

TEAM_ID = fake_slack.TEAM_ID
BOT_ID = fake_slack.BOT_ID
TEAM_DOMAIN = "sandbox"
API_APP_ID = "A0SIGNOFF"
# Slack still sends the legacy verification token; Bolt ignores it unless configured.
_LEGACY_TOKEN = "sandbox-verification-token"


def signature(secret: str, body: str | bytes, timestamp: int | str) -> str:
    """``v0=`` + HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the signing secret."""
    signed = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    if signed is None:  # slack_sdk returns None only without a timestamp
        raise ValueError("a timestamp is required to sign a request")
    return str(signed)


def signed_headers(secret: str, body: str | bytes, timestamp: int | None = None) -> dict[str, str]:
    """Headers for POSTing ``body`` to ``/slack/events`` as Slack would.

    ``timestamp`` defaults to now; pass an old one to test the +-5 minute window.
    """
    ts = int(time.time()) if timestamp is None else timestamp
    is_json = (body[:1] if isinstance(body, str) else body[:1].decode()) == "{"
    return {
        "Content-Type": "application/json" if is_json else "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": signature(secret, body, ts),
    }


def new_trigger_id() -> str:
    """A fresh trigger id in Slack's shape; each may open one view."""
    return f"{int(time.time())}.{secrets.randbelow(10**10)}.{secrets.token_hex(16)}"


def form_body(payload: JSON) -> str:
    """Interactivity payloads arrive form-encoded as a single ``payload`` field."""
    return urlencode({"payload": json.dumps(payload)})


def block_actions_payload(
    user_id: str,
    action_id: str,
    value: str,
    channel_id: str,
    message_ts: str,
    response_url: str,
    trigger_id: str,
    message: JSON | None = None,
    *,
    block_id: str = "signoff.actions",
    is_ephemeral: bool = False,
    user_name: str | None = None,
) -> JSON:
    """A button click on the message ``message_ts`` in ``channel_id``."""
    now = f"{time.time():.6f}"
    payload: JSON = {
        "type": "block_actions",
        "user": _user(user_id, user_name),
        "api_app_id": API_APP_ID,
        "token": _LEGACY_TOKEN,
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel_id,
            "is_ephemeral": is_ephemeral,
        },
        "channel": {"id": channel_id, "name": channel_id.lower()},
        "trigger_id": trigger_id,
        "response_url": response_url,
        "state": {"values": {}},
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "type": "button",
                "value": value,
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "action_ts": now,
            }
        ],
    }
    # Slack omits the message for clicks on ephemeral messages.
    if not is_ephemeral:
        payload["message"] = message or {
            "type": "message",
            "ts": message_ts,
            "bot_id": BOT_ID,
            "text": "",
            "blocks": [],
        }
    return payload


def slash_command_body(
    user_id: str,
    text: str,
    channel_id: str,
    response_url: str,
    trigger_id: str,
    command: str = "/signoff",
    *,
    user_name: str | None = None,
) -> str:
    """A slash command: plain form fields, no ``payload`` wrapper."""
    return urlencode(
        {
            "token": _LEGACY_TOKEN,
            "team_id": TEAM_ID,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel_id,
            "channel_name": channel_id.lower(),
            "user_id": user_id,
            "user_name": user_name or user_id.lower(),
            "command": command,
            "text": text,
            "api_app_id": API_APP_ID,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    )


def view_submission_payload(
    user_id: str,
    callback_id: str,
    private_metadata: str,
    values: StateValues,
    *,
    view_id: str = "V00000001",
    user_name: str | None = None,
) -> JSON:
    """A modal submitted with ``values`` as its ``state.values``."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "user": _user(user_id, user_name),
        "api_app_id": API_APP_ID,
        "token": _LEGACY_TOKEN,
        "trigger_id": new_trigger_id(),
        "enterprise": None,
        "is_enterprise_install": False,
        "response_urls": [],
        "view": {
            "id": view_id,
            "team_id": TEAM_ID,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "blocks": [],
            "state": {"values": _plain(values)},
            "hash": secrets.token_hex(8),
            "title": {"type": "plain_text", "text": "signoff"},
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": API_APP_ID,
            "bot_id": BOT_ID,
        },
    }


def _form_encoded(make: Callable[P, JSON]) -> Callable[P, str]:
    """``make``'s payload, form-encoded as Slack sends interactivity: same arguments."""

    @functools.wraps(make)
    def encoded(*args: P.args, **kwargs: P.kwargs) -> str:
        return form_body(make(*args, **kwargs))

    encoded.__doc__ = f":func:`{make.__name__}`, form-encoded, ready to sign and POST."
    return encoded


block_actions_body = _form_encoded(block_actions_payload)
view_submission_body = _form_encoded(view_submission_payload)


def _user(user_id: str, user_name: str | None) -> JSON:
    name = user_name or user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": TEAM_ID}


def _plain(values: StateValues) -> JSON:
    return {b: {a: dict(state) for a, state in actions.items()} for b, actions in values.items()}
