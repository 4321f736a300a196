"""The sandbox page: a small Slack client in the browser, and the JSON API it calls.

The page shows what the Web API stand-in (`FakeSlack`) holds: channels, DMs,
threads, ephemerals and modals, each message rendered from its Block Kit by
``static/app.js``. What a person does on the page becomes what Slack would
send: a button becomes a ``block_actions`` payload, the command box a
``/signoff`` slash command, the decline modal a ``view_submission``. Each is
signed with the signing secret exactly as Slack signs it and POSTed to the
bot's ``/slack/events``, so the bot under test is the one ``signoff serve``
runs, signature verification included.

The routes the page calls are in ``bot.sandbox.routes``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from bot.sandbox import fake_slack, signing

JSON = dict[str, Any]

#: The channel approval cards go to in the sandbox: both people can see it,
#: so the one who did not ask can try to approve and be refused.
APPROVALS_CHANNEL = "C0APPROVALS"


@dataclass(frozen=True)
class Person:
    """Someone the page can act as."""

    id: str
    name: str
    role: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role})"


#: The requester, and someone who is not an approver of the requester's cards.
REP = Person("U0RILEY", "Riley", "sales rep")
OTHER = Person("U0SAM", "Sam", "not an approver")
PEOPLE = (REP, OTHER)

#: Channels that exist before the bot posts anything: id -> name.
CHANNELS = {APPROVALS_CHANNEL: "approvals"}


class Controls(Protocol):
    """What the page changes in the demo app's world (the quotes example's CRM)."""

    async def all_accounts(self) -> list[dict[str, Any]]: ...

    async def set_credit_hold(self, name: str, hold: bool) -> None: ...

    async def set_tier(self, name: str, tier: str) -> None: ...

    async def sent_count(self, account: str | None = None) -> int: ...

    @property
    def tiers(self) -> Sequence[str]: ...


@dataclass
class World:
    """The demo app's world as the page controls it: a CRM and the tiers it knows."""

    crm: Controls
    tiers: Sequence[str]


@dataclass
class Sandbox:
    """Everything the page's routes need: the stand-in, where the bot listens, the secret."""

    fake: fake_slack.FakeSlack
    events_url: str
    signing_secret: str
    session: aiohttp.ClientSession
    app_ref: str
    world: World | None = None
    #: The app's example questions (``App.examples``): the page's placeholder and hints.
    examples: Sequence[str] = ()
    people: Sequence[Person] = PEOPLE
    #: Sent back by the page on every /ui/* request (see ``bot.sandbox.guard``).
    ui_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    #: Set in Socket Mode: delivers a body as an envelope instead of a signed POST.
    transport: Callable[[str], Awaitable[JSON]] | None = None
    #: trigger_id -> the user whose action issued it: a modal opens for that user.
    _triggers: dict[str, str] = field(default_factory=dict)
    #: Views submitted or dismissed: no longer shown.
    _closed: set[str] = field(default_factory=set)
    #: ts -> when the page first saw the message (the stand-in's ts values are sequence
    #: numbers, not clock readings), so messages show the time they arrived.
    _seen: dict[str, float] = field(default_factory=dict)

    # -- state -------------------------------------------------------------------

    async def state(self, user: str) -> JSON:
        """What ``user`` sees: channels, messages with threads, their ephemerals and modal."""
        raw = self.fake.workspace.state()
        for message in [*raw["messages"], *raw["ephemerals"]]:
            for one in [message, *message.get("replies", [])]:
                one["at"] = self._seen.setdefault(one["ts"], time.time())
        return {
            "app": self.app_ref,
            "examples": list(self.examples),
            "user": user,
            "people": [{"id": p.id, "name": p.name, "label": p.label} for p in self.people],
            "channels": self._channels(raw["channels"], user),
            "messages": raw["messages"],
            "ephemerals": [e for e in raw["ephemerals"] if e["user"] == user],
            "modal": self._modal(user),
            "world": await self.world_state(),
        }

    def _channels(self, found: list[JSON], user: str) -> list[JSON]:
        """Public channels, and the acting user's DM with the bot (others' DMs are private)."""
        mine = fake_slack.dm_channel(user)
        ids_seen = {c["id"] for c in found}
        listed = [{"id": cid, "name": name, "is_im": False} for cid, name in CHANNELS.items()]
        listed += [
            {"id": c["id"], "name": c.get("name") or c["id"], "is_im": False}
            for c in found
            if not c.get("is_im") and c["id"] not in CHANNELS
        ]
        listed.append({"id": mine, "name": "signoff", "is_im": True, "opened": mine in ids_seen})
        return listed

    def _modal(self, user: str) -> JSON | None:
        for view in reversed(self.fake.views):
            if view.id not in self._closed and self._triggers.get(view.trigger_id) == user:
                return {"id": view.id, **view.view}
        return None

    async def world_state(self) -> JSON | None:
        if self.world is None:
            return None
        accounts = await self.world.crm.all_accounts()
        for account in accounts:
            account["quotes_sent"] = await self.world.crm.sent_count(account["name"])
        return {
            "tiers": list(self.world.tiers),
            "accounts": accounts,
            "quotes_sent": await self.world.crm.sent_count(),
        }

    # -- what Slack would send ---------------------------------------------------

    def trigger(self, user: str) -> str:
        trigger_id = signing.new_trigger_id()
        self._triggers[trigger_id] = user
        return trigger_id

    def person(self, user: object) -> Person:
        for person in self.people:
            if person.id == user:
                return person
        known = ", ".join(p.id for p in self.people)
        raise web.HTTPBadRequest(text=f"unknown user {user!r}; one of {known}")

    async def deliver(self, body: str) -> JSON:
        """Sign ``body`` as Slack does and POST it to the bot; report what the bot answered."""
        if self.transport is not None:
            return await self.transport(body)
        headers = signing.signed_headers(self.signing_secret, body)
        async with self.session.post(self.events_url, data=body.encode(), headers=headers) as resp:
            text = await resp.text()
        answer: JSON = {"status": resp.status}
        if text:
            try:
                answer["body"] = json.loads(text)
            except ValueError:
                answer["body"] = text
        return answer

    def click_payload(self, person: Person, click: Mapping[str, Any]) -> JSON:
        """A block_actions payload for a button on a channel message or an ephemeral."""
        channel, ts = required_text(click, "channel"), required_text(click, "ts")
        ephemeral = bool(click.get("ephemeral"))
        found = self._find(channel, ts, person.id if ephemeral else None)
        payload = signing.block_actions_payload(
            person.id,
            required_text(click, "action_id"),
            str(click.get("value") or ""),
            channel,
            ts,
            self.fake.response_url(channel, message_ts=ts, user=person.id),
            self.trigger(person.id),
            None if ephemeral else _message_json(found),
            block_id=required_text(click, "block_id"),
            is_ephemeral=ephemeral,
            user_name=person.name.lower(),
        )
        if found.get("thread_ts"):
            payload["container"]["thread_ts"] = found["thread_ts"]
        return payload

    def _find(self, channel: str, ts: str, ephemeral_user: str | None) -> JSON:
        found: list[fake_slack.Message] | list[fake_slack.Ephemeral]
        if ephemeral_user is not None:
            found = [e for e in self.fake.ephemerals(ephemeral_user) if e.ts == ts]
        else:
            found = [m for m in self.fake.messages(channel) if m.ts == ts]
        if not found:
            raise web.HTTPNotFound(text=f"no message {ts} in {channel}")
        return {
            "ts": found[0].ts,
            "text": found[0].text,
            "blocks": found[0].blocks,
            "thread_ts": found[0].thread_ts,
        }

    def submission_payload(self, person: Person, form: Mapping[str, Any]) -> JSON:
        """A view_submission of the modal open for ``person``, with the typed values."""
        modal = self._modal(person.id)
        if modal is None or modal["id"] != form.get("view_id"):
            raise web.HTTPConflict(text="that modal is not open")
        typed = form.get("values") or {}
        values = {
            block["block_id"]: {
                element["action_id"]: {
                    "type": element.get("type", "plain_text_input"),
                    "value": _typed(typed, block["block_id"], element["action_id"]),
                }
            }
            for block in modal.get("blocks", [])
            if block.get("type") == "input"
            and isinstance(element := block.get("element"), dict)
            and "block_id" in block
            and "action_id" in element
        }
        return signing.view_submission_payload(
            person.id,
            str(modal.get("callback_id") or ""),
            str(modal.get("private_metadata") or ""),
            values,
            view_id=modal["id"],
            user_name=person.name.lower(),
        )

    def show_ack(self, answer: JSON, channel: str, user: str) -> None:
        """Slack shows a slash command's HTTP answer to the person who typed it."""
        body = answer.get("body")
        if answer["status"] != 200 or not body:
            return
        reply = body if isinstance(body, dict) else {"text": str(body)}
        if reply.get("text") or reply.get("blocks"):
            target = fake_slack.ResponseTarget(channel, None, user)
            self.fake.workspace.respond(target, {k: v for k, v in reply.items() if k != "ok"})

    def close(self, view_id: str) -> None:
        self._closed.add(view_id)


def _message_json(found: JSON) -> JSON:
    message = {
        "type": "message",
        "user": fake_slack.BOT_USER_ID,
        "bot_id": fake_slack.BOT_ID,
        "ts": found["ts"],
        "text": found["text"],
        "blocks": found["blocks"],
    }
    if found.get("thread_ts"):
        message["thread_ts"] = found["thread_ts"]
    return message


def _typed(typed: object, block_id: str, action_id: str) -> str | None:
    value = typed.get(block_id, {}).get(action_id) if isinstance(typed, dict) else None
    # Slack sends null for an optional input left empty.
    return str(value) if value else None


def required_text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise web.HTTPBadRequest(text=f"{key} is required")
    return value
