"""Every Slack-facing identifier signoff uses, in one place.

`manifest.yml` must agree with this module; `tests/bot/test_manifest.py` checks
that it does. Listeners, cards and modals import these names instead of
spelling the strings themselves, so a rename is one edit here plus one in the
manifest.

Action ids and callback ids are part of signoff's external contract:
messages already posted in Slack carry them, so changing one orphans every
card in flight.
"""

from __future__ import annotations

from typing import Final

# --- HTTP paths served by `signoff serve` ----------------------------------

#: Events, interactivity and slash commands all arrive on this one URL.
EVENTS_PATH: Final = "/slack/events"
#: Liveness: the process is up and serving HTTP.
HEALTH_PATH: Final = "/healthz"
#: Readiness: the database is reachable.
READY_PATH: Final = "/readyz"
#: Prometheus metrics (guarded: see bot/metrics.py).
METRICS_PATH: Final = "/metrics"

# --- Slash command -----------------------------------------------------------

#: The one slash command; its subcommands are below.
COMMAND: Final = "/signoff"
#: Subcommands of `/signoff`, in the order `help` lists them.
SUBCOMMANDS: Final = ("ask", "continue", "status", "list", "cancel", "help")
#: Usage line shown by Slack's command picker (also in manifest.yml).
COMMAND_USAGE_HINT: Final = (
    "ask <question> | continue <run-id> | status <run-id> | list | cancel <run-id> | help"
)

# --- Approval card -----------------------------------------------------------

#: Approve button; its value is the run's pending token.
APPROVE_ACTION: Final = "signoff.approve"
#: Decline button; its value is the run's pending token. Opens the reason modal.
DECLINE_ACTION: Final = "signoff.decline"
#: The actions block holding the Approve and Decline buttons. A replaced card
#: has no block with this id, which is how "buttons gone" is recognised.
ACTIONS_BLOCK: Final = "signoff.actions"

# --- Decline-reason modal ----------------------------------------------------

#: callback_id of the modal that asks for an optional decline reason.
DECLINE_REASON_CALLBACK: Final = "signoff.decline_reason"
#: block_id of the modal's input block.
DECLINE_REASON_BLOCK: Final = "signoff.decline_reason.input"
#: action_id of the plain-text input inside that block; the submitted reason
#: is at `view.state.values[DECLINE_REASON_BLOCK][DECLINE_REASON_ACTION].value`.
DECLINE_REASON_ACTION: Final = "signoff.decline_reason.value"

# --- OAuth scopes --------------------------------------------------------------

#: The bot-token scope each Slack Web API method signoff calls needs (None:
#: the method needs no scope). Adding a call to a method not listed here fails
#: tests/bot/test_manifest.py until the method and its scope are added here
#: and to manifest.yml.
SCOPES_BY_METHOD: Final[dict[str, str | None]] = {
    "auth.test": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.getPermalink": None,
    "conversations.open": "im:write",
    "conversations.history": "channels:history",
    "conversations.replies": "channels:history",
    "users.info": "users:read",
    "users.lookupByEmail": "users:read.email",
    "views.open": None,
    "views.update": None,
}

#: Scopes the bot needs beyond those implied by the methods above:
#: `commands` to own `/signoff`, `chat:write.public` to post approval cards
#: in a public channel the bot was never invited to, and the history of private
#: channels and DMs, where a card whose post answer was lost is looked for.
EXTRA_BOT_SCOPES: Final = ("commands", "chat:write.public", "groups:history", "im:history")

#: ``event_type`` of the metadata on every approval card; its ``event_payload``
#: carries ``run_id`` and ``token``, so a card posted once can be found again.
CARD_EVENT_TYPE: Final = "signoff_card"


def required_bot_scopes() -> frozenset[str]:
    """Every bot scope manifest.yml must request."""
    from_methods = {scope for scope in SCOPES_BY_METHOD.values() if scope is not None}
    return frozenset(from_methods | set(EXTRA_BOT_SCOPES))
