"""A real `signoff serve` for the client's tests, and a person deciding on its cards.

``Served`` is one replica from ``tests.acceptance.replicas`` (its own process, the Slack
stand-in in the test's loop), an API key created with the real ``signoff api-keys create``,
and the requester's clicks, signed, through the real Bolt app.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
from signoff_client import Run, Signoff

from bot import ids
from bot.sandbox import fake_slack, signing
from tests.acceptance import replicas

REQUESTER = "U0CLIENT01"
KEY_PATTERN = re.compile(r"\bso_[A-Za-z0-9_-]{32,}")


def signoff_cli(db_url: str, *args: str) -> str:
    """Run the real `signoff` command on ``db_url``; its output (fails the test if it fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "SIGNOFF_"))}
    env["DATABASE_URL"] = db_url
    done = subprocess.run([sys.executable, "-m", "bot", *args], cwd=replicas.REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"signoff {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def create_key(db_url: str, name: str, *tools: str) -> str:
    globs = [arg for glob in tools for arg in ("--tools", glob)]
    printed = signoff_cli(db_url, "api-keys", "create", name, *globs)
    found = KEY_PATTERN.search(printed)
    assert found, f"no key in the output of api-keys create: {printed!r}"
    return found.group(0)


def sqlite_db(tmp: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp / 'signoff.db'}"
    signoff_cli(url, "db", "upgrade")
    return url


@dataclass
class Served:
    cluster: replicas.Cluster
    replica: replicas.Replica
    db_url: str
    api_key: str
    #: Look for cards only among this key's runs (a test's own key on a shared server).
    own_cards: bool = False

    @property
    def url(self) -> str:
        return self.replica.url

    def with_own_key(self, name: str) -> Served:
        """The same server with a new key of its own, whose cards are its runs' only."""
        key = create_key(self.db_url, f"{name}-{secrets.token_hex(3)}", "*")
        return replace(self, api_key=key, own_cards=True)

    def cards(self) -> list[fake_slack.Message]:
        """Messages that carry Approve buttons now, oldest first (with ``own_cards``, of this
        key's runs only)."""
        runs = self.key_runs() if self.own_cards else None
        return [m for m in self.cluster.fake.messages() if replicas.has_buttons(m)
                and (runs is None or card_run(m) in runs)]

    def key_runs(self) -> set[str]:
        """The runs of this key's calls, as the API lists them (a blocking read: the server
        answers it without the Slack stand-in, so the test's loop may wait on it)."""
        response = httpx.get(f"{self.url}/api/v1/calls",
                             headers={"Authorization": f"Bearer {self.api_key}"}, timeout=30)
        assert response.status_code == 200, response.text
        return {call["run_id"] for call in response.json()["calls"]}

    def open_card(self, tool: str | None = None,
                  run_id: str | None = None) -> fake_slack.Message | None:
        found = [m for m in self.cards() if (tool is None or tool in json.dumps(m.blocks))
                 and (run_id is None or card_run(m) == run_id)]
        return found[-1] if found else None

    async def wait_for_card(self, tool: str | None = None,
                            run_id: str | None = None) -> fake_slack.Message:
        async def posted() -> fake_slack.Message | None:
            return self.open_card(tool, run_id)

        return await replicas.until(posted, timeout=30, what=f"an approval card for {tool}")

    async def approve(self, card: fake_slack.Message, user: str = REQUESTER) -> None:
        await self._click(card, ids.APPROVE_ACTION, user)

    async def decline(self, card: fake_slack.Message, reason: str | None,
                      user: str = REQUESTER) -> None:
        """Decline, then submit the reason modal, as a person does."""
        await self._click(card, ids.DECLINE_ACTION, user)
        token = self.token(card)
        values = {ids.DECLINE_REASON_BLOCK: {ids.DECLINE_REASON_ACTION: {
            "type": "plain_text_input", "value": reason}}}
        body = signing.view_submission_body(user, ids.DECLINE_REASON_CALLBACK, token, values)
        status, text = await self.cluster.post(self.replica, body)
        assert status == 200, (status, text, self.replica.tail())

    @staticmethod
    def token(card: fake_slack.Message) -> str:
        tokens = replicas.button_tokens(card.blocks)
        assert tokens, "the card has no Approve button"
        return tokens[0]

    async def _click(self, card: fake_slack.Message, action: str, user: str) -> None:
        response_url = self.cluster.fake.response_url(card.channel, message_ts=card.ts, user=user)
        body = signing.block_actions_body(
            user, action, self.token(card), card.channel, card.ts, response_url,
            signing.new_trigger_id(),
            {"type": "message", "ts": card.ts, "text": card.text, "blocks": card.blocks})
        status, text = await self.cluster.post(self.replica, body)
        assert status == 200, (status, text, self.replica.tail())


@asynccontextmanager
async def served(db_url: str, tmp: Path, **env: str) -> AsyncIterator[Served]:
    """One `signoff serve` on ``db_url`` (at head) with a key allowed every tool."""
    key = create_key(db_url, "client-tests", "*")
    async with replicas.cluster(db_url, tmp) as cluster:
        (replica,) = await cluster.start(1, **env)
        yield Served(cluster, replica, db_url, key)


@asynccontextmanager
async def started_run(served: Served, title: str) -> AsyncIterator[Run]:
    """A new external run of the requester's on ``served``, with the client open for the block."""
    async with Signoff(served.url, api_key=served.api_key) as so:
        yield await so.start_run(requester=REQUESTER, title=title)


def card_run(card: fake_slack.Message) -> str | None:
    """The run a card is for, from the metadata every approval card carries."""
    payload = (card.metadata or {}).get("event_payload") or {}
    return payload.get("run_id") if isinstance(payload, dict) else None


async def diff_card(served: Served, first: fake_slack.Message) -> fake_slack.Message:
    """The card posted after ``first`` for the same run: the diff card of a changed call."""
    async def posted() -> fake_slack.Message | None:
        card = served.open_card("refund_order", card_run(first))
        return card if card is not None and card.ts != first.ts else None

    return await replicas.until(posted, timeout=30, what="the diff card")

