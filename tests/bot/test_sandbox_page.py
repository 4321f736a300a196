"""`signoff sandbox`: its settings, and the page's /ui/* routes over real HTTP.

``sandbox_settings`` gives the sandbox its own database file and an approvals
channel both sandbox people can see. The whole sandbox (stand-in, bot,
scheduler, page) is started in a scratch directory and driven through the
page's JSON API as the browser drives it; the CRM panel's route is checked on
both dialects, bad input included (a 400 that changes nothing).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import test_utils, web

from bot import config, ids
from bot.api import auth
from bot.sandbox import fake_slack, guard, page, routes, runner
from examples import purchase, quotes
from examples.crm import CRM, TIERS
from store import api_keys, engine, runs
from store.engine import Database
from store.states import RunState
from tests.bot import harness
from tests.bot.harness import ASK

API = "http://127.0.0.1:9/api/"
QUOTES = "examples.quotes:app"


@pytest.fixture(autouse=True)
def no_sandbox_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "SIGNOFF_APPROVALS_CHANNEL"):
        # set, then delete: the variable is put back as it was (unset) even though
        # `started()` sets DATABASE_URL for the example app.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


# -- sandbox_settings ----------------------------------------------------------------------


def test_sandbox_settings__own_database_file_and_the_shared_approvals_channel() -> None:
    settings = runner.sandbox_settings(config.load_settings(), QUOTES, API)

    assert settings.database_url == "sqlite+aiosqlite:///./signoff-sandbox.db"
    assert settings.database_url != config.load_settings().database_url  # not serve's file
    assert settings.approvals_channel == page.APPROVALS_CHANNEL == "C0APPROVALS"
    assert page.CHANNELS[settings.approvals_channel] == "approvals"
    assert (settings.slack_api_url, settings.app, settings.host) == (API, QUOTES, "127.0.0.1")


def test_sandbox_settings__fresh_credentials_for_every_process() -> None:
    first = runner.sandbox_settings(config.load_settings(), QUOTES, API).require_slack()
    second = runner.sandbox_settings(config.load_settings(), QUOTES, API).require_slack()

    assert first.bot_token.startswith("xoxb-sandbox-") and len(first.signing_secret) == 32
    assert first.bot_token != second.bot_token and first.signing_secret != second.signing_secret


def test_sandbox_settings__keeps_a_database_and_channel_that_were_chosen(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    chosen = f"sqlite+aiosqlite:///{tmp_path / 'mine.db'}"
    monkeypatch.setenv("SIGNOFF_APPROVALS_CHANNEL", "C0MINE")

    from_env = runner.sandbox_settings(
        config.load_settings(DATABASE_URL=chosen), QUOTES, API)
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db/x")
    from_variable = runner.sandbox_settings(config.load_settings(), QUOTES, API)

    assert (from_env.database_url, from_env.approvals_channel) == (chosen, "C0MINE")
    assert from_variable.database_url == "postgresql+asyncpg://u@db/x"


# -- the whole sandbox, driven through its page ----------------------------------------------


@pytest.fixture
async def running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[runner.Running]:
    monkeypatch.chdir(tmp_path)
    quotes.crm_from_env.cache_clear()  # the example's CRM opens on this sandbox's file
    try:
        async with runner.started(config.load_settings(), QUOTES, 0) as found:
            yield found
    finally:
        await harness.close_opened(quotes.crm_from_env)


class PageClient:
    """The browser's side of the page: its JSON API, with the token the page was served."""

    def __init__(self, url: str, http: aiohttp.ClientSession, token: str) -> None:
        self.url, self.http = url.rstrip("/"), http
        self.headers = {guard.TOKEN_HEADER: token}

    @classmethod
    async def open(cls, url: str, http: aiohttp.ClientSession) -> PageClient:
        """Load the page, as a browser does, and keep the token it carries."""
        async with http.get(url) as response:
            assert response.status == 200
            html = await response.text()
        found = re.search(r'name="signoff-sandbox-token" content="([^"]+)"', html)
        return cls(url, http, found.group(1) if found else "")

    async def post(self, path: str, data: object) -> tuple[int, Any]:
        async with self.http.post(self.url + path, json=data, headers=self.headers) as response:
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, await response.text()

    async def state(self, user: str) -> dict[str, Any]:
        async with self.http.get(self.url + "/ui/state", params={"user": user},
                                 headers=self.headers) as response:
            assert response.status == 200
            found: dict[str, Any] = await response.json()
            return found


async def _eventually(check: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (found := await check()):
            await asyncio.sleep(0.05)
    return found


def _card(state: dict[str, Any]) -> dict[str, Any] | None:
    """The approval card with buttons in the approvals channel, if one is showing."""
    for message in state["messages"]:
        if message["channel"] == page.APPROVALS_CHANNEL and _approve_button(message):
            return dict(message)
    return None


def _approve_button(message: dict[str, Any]) -> dict[str, Any] | None:
    for block in message.get("blocks") or []:
        for element in block.get("elements") or []:
            if element.get("action_id") == ids.APPROVE_ACTION:
                return {"block_id": block["block_id"], "value": element["value"]}
    return None


def _account(world: dict[str, Any], name: str) -> dict[str, Any]:
    """One account as the page's CRM panel shows it."""
    [found] = [a for a in world["accounts"] if a["name"] == name]
    return dict(found)


@pytest.mark.parametrize(("ref", "panel"), [(QUOTES, True), ("examples.purchase:app", False)])
async def test_sandbox__the_page_offers_the_apps_examples_and_its_world_panel_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str, panel: bool,
) -> None:
    monkeypatch.chdir(tmp_path)
    quotes.crm_from_env.cache_clear()
    purchase.shop_from_env.cache_clear()
    try:
        async with runner.started(config.load_settings(), ref, 0) as found, \
                aiohttp.ClientSession() as http:
            ui = await PageClient.open(found.url, http)
            state = await ui.state(page.REP.id)
    finally:
        await harness.close_opened(quotes.crm_from_env)
        await harness.close_opened(purchase.shop_from_env)
    expected = quotes.EXAMPLES if ref == QUOTES else purchase.EXAMPLES
    assert state["examples"] == expected and expected
    assert (state["world"] is not None) is panel
    if panel:
        assert _account(state["world"], "Henderson")["discount_tier"] == "gold"
    else:
        assert not any("Henderson" in e for e in state["examples"])


async def test_sandbox__ask_refuse_approve_and_crm_through_the_page(
    running: runner.Running, tmp_path: Path
) -> None:
    assert running.database_url == runner.DEFAULT_DATABASE_URL
    assert (tmp_path / "signoff-sandbox.db").exists() and not (tmp_path / "signoff.db").exists()
    rep, other = page.REP.id, page.OTHER.id
    async with aiohttp.ClientSession() as http:
        ui = await PageClient.open(running.url, http)

        status, answer = await ui.post("/ui/command", {
            "user": rep, "channel": page.APPROVALS_CHANNEL, "text": f"/signoff ask {ASK}"})
        assert status == 200 and answer["status"] == 200, answer

        async def card_shown() -> dict[str, Any] | None:
            return _card(await ui.state(rep))

        card = await _eventually(card_shown)
        button = _approve_button(card)
        assert button is not None
        click = {"channel": card["channel"], "ts": card["ts"], "action_id": ids.APPROVE_ACTION,
                 **button}

        # Sam is no approver: the page shows Sam (only) the refusal; nothing is sent.
        status, answer = await ui.post("/ui/click", {"user": other, **click})
        assert status == 200 and answer["status"] == 200

        async def refused() -> list[dict[str, Any]]:
            return [e for e in (await ui.state(other))["ephemerals"]
                    if f"only <@{rep}> can" in e["text"]]

        await _eventually(refused)
        assert (await ui.state(rep))["world"]["quotes_sent"] == 0

        status, answer = await ui.post("/ui/click", {"user": rep, **click})
        assert status == 200 and answer["status"] == 200

        async def sent() -> bool:
            state = await ui.state(rep)
            return bool(state["world"]["quotes_sent"] == 1 and _card(state) is None)

        await _eventually(sent)
        assert _account((await ui.state(rep))["world"], "Henderson")["quotes_sent"] == 1

        status, answer = await ui.post("/ui/crm", {"account": "Acme", "tier": "platinum"})
        assert status == 200 and _account(answer["world"], "Acme")["discount_tier"] == "platinum"
        status, _ = await ui.post("/ui/crm", {"account": "Acme", "tier": "diamond"})
        assert status == 400
        assert _account((await ui.state(rep))["world"], "Acme")["discount_tier"] == "platinum"


async def test_sandbox__page_requests_without_what_they_need_are_400(
    running: runner.Running,
) -> None:
    async with aiohttp.ClientSession() as http:
        ui = await PageClient.open(running.url, http)
        async with http.get(ui.url + "/ui/state", params={"user": "U0NOBODY"},
                            headers=ui.headers) as response:
            assert response.status == 400
        assert (await ui.post("/ui/command", {"user": "U0NOBODY", "channel": "C1",
                                              "text": "help"}))[0] == 400
        assert (await ui.post("/ui/command", {"user": page.REP.id, "text": "help"}))[0] == 400
        assert (await ui.post("/ui/click", {"user": page.REP.id, "channel": "C1"}))[0] == 400
        assert (await ui.post("/ui/dismiss", {}))[0] == 400
        assert (await ui.post("/ui/submit", ["not", "an", "object"]))[0] == 400
        state = await ui.state(page.REP.id)
        assert state["messages"] == [] and state["ephemerals"] == []


# -- only the sandbox's own page drives it -------------------------------------------------


async def _waiting_card(ui: PageClient) -> dict[str, Any]:
    status, _ = await ui.post("/ui/command", {
        "user": page.REP.id, "channel": page.APPROVALS_CHANNEL, "text": f"/signoff ask {ASK}"})
    assert status == 200

    async def card_shown() -> dict[str, Any] | None:
        return _card(await ui.state(page.REP.id))

    card: dict[str, Any] = await _eventually(card_shown)
    return card


def _click_of(card: dict[str, Any]) -> dict[str, Any]:
    return {"user": page.REP.id, "channel": card["channel"], "ts": card["ts"],
            "action_id": ids.APPROVE_ACTION, **(_approve_button(card) or {})}


async def test_sandbox__another_host_origin_or_no_token_gets_nothing_and_changes_nothing(
    running: runner.Running,
) -> None:
    """DNS rebinding (``Host: evil.example``), another site's page (its ``Origin``, a
    ``text/plain`` form) and a request without the page's token: no page, no state, no
    pending token, no click. The same click from the page itself then approves."""
    async with aiohttp.ClientSession() as http:
        ui = await PageClient.open(running.url, http)
        card = await _waiting_card(ui)
        pending = (_approve_button(card) or {})["value"]
        port = running.url.rstrip("/").rsplit(":", 1)[1]
        evil_host = {"Host": f"evil.example:{port}"}
        evil_origin = {"Origin": "http://evil.example"}
        refused: list[tuple[int, str]] = []
        for method, path, headers in [
            ("GET", "/", evil_host),
            ("GET", f"/ui/state?user={page.REP.id}", ui.headers | evil_host),
            ("GET", f"/ui/state?user={page.REP.id}", {}),
            ("GET", f"/ui/state?user={page.REP.id}", ui.headers | {"Origin": "null"}),
        ]:
            async with http.request(method, ui.url + path, headers=headers) as response:
                refused.append((response.status, await response.text()))
        posts: list[tuple[dict[str, str], dict[str, Any]]] = [
            (ui.headers | evil_host, {"json": _click_of(card)}),
            (ui.headers | evil_origin, {"json": _click_of(card)}),
            (evil_origin | {"Content-Type": "text/plain"}, {"data": str(_click_of(card))}),
            ({}, {"json": _click_of(card)}),
            ({guard.TOKEN_HEADER: "guessed"}, {"json": _click_of(card)}),
        ]
        for headers, kwargs in posts:
            async with http.post(ui.url + "/ui/click", headers=headers, **kwargs) as response:
                refused.append((response.status, await response.text()))
        await asyncio.sleep(0.5)  # a click let through would have been delivered by now

        assert [status for status, _ in refused] == [403] * len(refused)
        assert not any(pending in text or ui.headers[guard.TOKEN_HEADER] in text
                       for _, text in refused)
        state = await ui.state(page.REP.id)
        assert _card(state) is not None and state["world"]["quotes_sent"] == 0

        status, answer = await ui.post("/ui/click", _click_of(card))

        assert status == 200 and answer["status"] == 200, answer
        await _eventually(lambda: _sent(ui))


async def _sent(ui: PageClient) -> bool:
    return bool((await ui.state(page.REP.id))["world"]["quotes_sent"] == 1)


# -- the CRM panel's route, on both dialects -----------------------------------------------

Client = test_utils.TestClient[web.Request, web.Application]


@pytest.fixture
async def crm(db: Database) -> CRM:
    found = CRM(db)
    await found.setup()
    return found


@pytest.fixture
async def client(crm: CRM) -> AsyncIterator[Client]:
    async with fake_slack.FakeSlack() as fake, aiohttp.ClientSession() as session:
        sandbox = page.Sandbox(
            fake=fake, events_url="http://127.0.0.1:9/slack/events", signing_secret="s" * 32,
            session=session, app_ref=QUOTES, world=page.World(crm=crm, tiers=list(TIERS)))
        async with test_utils.TestClient(test_utils.TestServer(routes.application(sandbox)),
                                         headers={guard.TOKEN_HEADER: sandbox.ui_token}) as c:
            yield c


async def _rows(crm: CRM) -> dict[str, tuple[str, bool]]:
    return {a["name"]: (a["discount_tier"], bool(a["credit_hold"]))
            for a in await crm.all_accounts()}


async def test_crm_route__credit_hold_toggles_the_accounts_row(client: Client, crm: CRM) -> None:
    before = await _rows(crm)

    held = await client.post("/ui/crm", json={"account": "Henderson", "credit_hold": True})
    assert held.status == 200
    assert _account((await held.json())["world"], "Henderson")["credit_hold"] is True
    assert await _rows(crm) == {**before, "Henderson": (before["Henderson"][0], True)}

    released = await client.post("/ui/crm", json={"account": "Henderson", "credit_hold": False})
    assert released.status == 200
    assert await _rows(crm) == before


async def test_crm_route__tier_change_changes_the_accounts_row(client: Client, crm: CRM) -> None:
    before = await _rows(crm)
    assert before["Globex"] == ("standard", False)

    changed = await client.post("/ui/crm", json={"account": "Globex", "tier": "gold"})

    assert changed.status == 200
    assert _account((await changed.json())["world"], "Globex")["discount_tier"] == "gold"
    assert await _rows(crm) == {**before, "Globex": ("gold", False)}


@pytest.mark.parametrize(
    "body",
    [
        {"account": "Henderson", "tier": "diamond"},
        {"account": "Henderson", "credit_hold": True, "tier": "diamond"},
        {"account": "Henderson", "credit_hold": "yes"},
        {"account": "Henderson", "credit_hold": 1, "tier": "silver"},
        {"account": "Henderson", "tier": ""},
        {"account": "Henderson"},
        {"account": "Nobody Inc", "credit_hold": True},
        {"credit_hold": True},
        {"account": "", "tier": "silver"},
        ["Henderson", True],
        "not json",
    ],
    ids=["unknown-tier", "hold-with-unknown-tier", "hold-not-bool", "hold-int-with-tier",
         "empty-tier", "nothing-to-change", "unknown-account", "no-account", "empty-account",
         "not-an-object", "not-json"],
)
async def test_crm_route__bad_input_is_400_and_changes_nothing(
    client: Client, crm: CRM, body: object
) -> None:
    before = await _rows(crm)

    if isinstance(body, str):
        response = await client.post("/ui/crm", data=body,
                                     headers={"Content-Type": "application/json"})
    else:
        response = await client.post("/ui/crm", json=body)

    assert response.status == 400, await response.text()
    assert await _rows(crm) == before


async def test_crm_route__an_app_without_a_crm_is_404() -> None:
    async with fake_slack.FakeSlack() as fake, aiohttp.ClientSession() as session:
        sandbox = page.Sandbox(fake=fake, events_url="http://127.0.0.1:9/slack/events",
                               signing_secret="s" * 32, session=session,
                               app_ref="examples.purchase:app")
        async with test_utils.TestClient(test_utils.TestServer(routes.application(sandbox)),
                                         headers={guard.TOKEN_HEADER: sandbox.ui_token}) as c:
            response = await c.post("/ui/crm", json={"account": "Henderson", "tier": "gold"})
            assert response.status == 404
            state = await (await c.get("/ui/state")).json()
            assert state["world"] is None


async def test_sandbox__the_api_answers_on_the_pages_port_and_its_card_shows_on_the_page(
    running: runner.Running,
) -> None:
    """An agent uses the address the banner prints first: /api/v1/ on the page's port."""
    assert f"{running.url}api/v1/" in runner.banner(running)
    key = auth.new_key()
    db = engine.connect(running.database_url)
    try:
        await api_keys.create(db, key_id="key_sandbox", name="sandbox", key_hash=auth.key_hash(key),
                              tools=["*"], webhook_url=None, webhook_secret=None,
                              now=datetime.now(UTC))
        before = len(await runs.list_runs(db, limit=50))
        bearer = {"Authorization": f"Bearer {key}"}
        new_run = {"external": True, "requester": page.REP.id, "title": "Refund for ticket 4411",
                   "idempotency_key": "ticket-4411"}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{running.url}api/v1/runs", json=new_run) as refused:
                assert refused.status == 401 and (await refused.json())["error"]
            assert len(await runs.list_runs(db, limit=50)) == before  # nothing made unkeyed
            async with http.get(f"{running.url}api/v1/openapi.json") as spec:
                assert spec.status == 200 and (await spec.json())["openapi"].startswith("3.1")
            async with http.post(f"{running.url}api/v1/runs", json=new_run,
                                 headers=bearer) as made:
                assert made.status == 201, await made.text()
                run_id = (await made.json())["id"]
            call = {"call_id": "refund-1", "tool": "refund_order",
                    "args": {"order_id": "A-1", "amount": 40.0},
                    "preview": {"title": "Refund A-1", "fields": [["Order", "A-1"]]}}
            async with http.post(f"{running.url}api/v1/runs/{run_id}/calls", json=call,
                                 headers=bearer) as asked:
                assert asked.status == 201, await asked.text()
                assert (await asked.json())["status"] == "pending"
            ui = await PageClient.open(running.url, http)

            async def card_shown() -> dict[str, Any] | None:
                return _card(await ui.state(page.REP.id))

            card = await _eventually(card_shown)
            assert "Refund A-1" in str(card)
        assert (await runs.get(db, run_id)).state is RunState.suspended
    finally:
        await db.dispose()
