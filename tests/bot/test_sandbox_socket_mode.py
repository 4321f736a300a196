"""`signoff sandbox --socket-mode`: the quickstart through the page, every click and command an
envelope on the stand-in's WebSocket, handled by the real Bolt Socket Mode handler."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot import config, ids
from bot.sandbox import page
from bot.sandbox import runner as sandbox_app
from examples import quotes
from tests.bot import harness
from tests.bot.harness import ASK
from tests.bot.test_sandbox_page import (
    QUOTES,
    PageClient,
    _approve_button,
    _card,
    _eventually,
)


@pytest.fixture
async def running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[sandbox_app.Running]:
    monkeypatch.chdir(tmp_path)
    for name in ("DATABASE_URL", "SIGNOFF_APPROVALS_CHANNEL", "SIGNOFF_APP"):
        monkeypatch.delenv(name, raising=False)
    quotes.crm_from_env.cache_clear()  # the example's CRM opens on this sandbox's file
    try:
        async with sandbox_app.started(config.load_settings(), QUOTES, 0,
                                       socket_mode=True) as found:
            yield found
    finally:
        await harness.close_opened(quotes.crm_from_env)


def _click(card: dict[str, Any], action: str) -> dict[str, Any]:
    button = _approve_button(card)
    assert button is not None
    return {"channel": card["channel"], "ts": card["ts"], "action_id": action, **button}


async def test_sandbox_socket_mode__quickstart_through_the_page_as_envelopes(
    running: sandbox_app.Running,
) -> None:
    socket = running.socket
    assert socket is not None and "Socket Mode" in sandbox_app.banner(running)
    rep, other = page.REP.id, page.OTHER.id
    async with aiohttp.ClientSession() as http:
        ui = await PageClient.open(running.url, http)

        async def card_shown() -> dict[str, Any] | None:
            return _card(await ui.state(rep))

        # 1-2. Ask, someone else is refused, Riley approves: one quote sent.
        status, answer = await ui.post("/ui/command", {
            "user": rep, "channel": page.APPROVALS_CHANNEL, "text": f"/signoff ask {ASK}"})
        assert status == 200 and answer["status"] == 200, answer
        card = await _eventually(card_shown)
        status, answer = await ui.post("/ui/click", {"user": other,
                                                     **_click(card, ids.APPROVE_ACTION)})
        assert answer["status"] == 200
        assert (await ui.state(rep))["world"]["quotes_sent"] == 0
        status, answer = await ui.post("/ui/click", {"user": rep,
                                                     **_click(card, ids.APPROVE_ACTION)})
        assert answer["status"] == 200

        async def sent() -> bool:
            state = await ui.state(rep)
            return bool(state["world"]["quotes_sent"] == 1 and _card(state) is None)

        await _eventually(sent)

        # 4. Decline opens the reason modal; submitting it declines, nothing more is sent.
        await ui.post("/ui/command", {"user": rep, "channel": page.APPROVALS_CHANNEL,
                                      "text": f"/signoff ask {ASK}"})
        card = await _eventually(card_shown)
        await ui.post("/ui/click", {"user": rep, **_click(card, ids.DECLINE_ACTION)})

        async def modal() -> dict[str, Any] | None:
            found: dict[str, Any] | None = (await ui.state(rep))["modal"]
            return found

        form = await _eventually(modal)
        status, answer = await ui.post("/ui/submit", {
            "user": rep, "view_id": form["id"],
            "values": {ids.DECLINE_REASON_BLOCK: {ids.DECLINE_REASON_ACTION: "not this week"}}})
        assert answer["status"] == 200, answer

        async def declined() -> bool:
            shown = json.dumps((await ui.state(rep))["messages"])
            return "Declined by" in shown

        await _eventually(declined)
        assert (await ui.state(rep))["world"]["quotes_sent"] == 1
        assert (await ui.state(rep))["modal"] is None

        # No connection, no delivery: the page shows the failure, and a re-click works.
        card_count = len(socket.acks)
        socket.accepting = False
        first = socket.connections
        await socket.drop()
        status, answer = await ui.post("/ui/command", {
            "user": rep, "channel": page.APPROVALS_CHANNEL, "text": "/signoff help"})
        assert answer["status"] == 503 and "no Socket Mode connection" in json.dumps(answer)
        socket.accepting = True
        await socket.connected(more_than=first)
        status, answer = await ui.post("/ui/command", {
            "user": rep, "channel": page.APPROVALS_CHANNEL, "text": "/signoff help"})
        assert answer["status"] == 200

    # Every page action reached the bot as an envelope and was acked.
    kinds = [a.type for a in socket.acks]
    assert kinds.count("slash_commands") == 3 and len(kinds) == card_count + 1
    assert "view_submission" not in kinds and kinds.count("interactive") == 4
    assert not any(a.late for a in socket.acks)
