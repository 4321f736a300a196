"""Listener callbacks called directly, the way the bolt-python starter template tests them.

A fake ``ack`` and ``respond`` stand in for Bolt; the context is filled by the
same global middleware ``bot.bolt_app`` installs; the store is real (SQLite
and PostgreSQL), and so is the quotes app behind it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_bolt.async_app import AsyncAck, AsyncBoltContext, AsyncRespond
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook import WebhookResponse

from bot import config
from bot.listeners import buttons, commands
from bot.sandbox import fake_slack
from bot.services import Services
from store import runs
from store.engine import Database
from store.records import Run
from store.states import RunState
from tests.quotes_harness import ASK, quotes_world

APPROVALS = "C0APPROVALS"
REP, OTHER = "U0REP", "U0OTHER"


class FakeAck(AsyncAck):
    """Bolt's own ``ack``, recording each call: Bolt answers Slack's HTTP request with it."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Bolt leaves AsyncAck.__init__ bare
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, *args: Any, **kwargs: Any) -> BoltResponse:
        if args:  # recorded by name only, so a positional argument would go unseen
            raise TypeError("pass ack's arguments by name")
        self.calls.append(kwargs)
        return await super().__call__(**kwargs)


class FakeRespond(AsyncRespond):
    """Records each ``respond(...)``: Bolt's would POST it to the response_url."""

    def __init__(self) -> None:
        super().__init__(response_url=None)
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, *args: Any, **kwargs: Any) -> WebhookResponse:
        if args:  # recorded by name only, so a positional argument would go unseen
            raise TypeError("pass respond's arguments by name")
        inspect.signature(AsyncRespond.__call__).bind(self, **kwargs)  # only Bolt's own names
        self.calls.append(kwargs)
        return WebhookResponse(url="", status_code=200, body="ok", headers={})

    @property
    def texts(self) -> list[str]:
        return [str(call["text"]) for call in self.calls]


@pytest.fixture
async def services(db: Database) -> AsyncIterator[Services]:
    world = await quotes_world(db, approvals_channel=APPROVALS)
    async with fake_slack.FakeSlack() as fake:
        client = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
        held = Services(rt=world.rt, settings=config.load_settings(), client=client)
        yield held
        await held.drain(timeout=30)


async def _context(services: Services) -> AsyncBoltContext:
    """A request's context after the global middleware ``bot.bolt_app`` installs has run."""
    context = AsyncBoltContext()

    async def next_() -> BoltResponse:
        return BoltResponse(status=200)

    await services.into_context({}, context, next_)  # no authorize result: nothing to compare
    return context


async def _ask(services: Services) -> Run:
    ack, respond = FakeAck(), FakeRespond()
    await commands.on_command(ack=ack, command={"text": f"ask {ASK}", "user_id": REP},
                              respond=respond, context=await _context(services))
    await services.drain(timeout=30)
    [run] = await runs.list_runs(services.rt.db, user_id=REP, limit=1)
    assert ack.calls == [{}]
    assert respond.texts[0].startswith(f":hourglass_flowing_sand: Started run `{run.id}`")
    assert run.state is RunState.suspended and run.pending_token
    return run


def _click(token: str, user: str) -> dict[str, Any]:
    return {"actions": [{"action_id": "signoff.approve", "value": token}], "user": {"id": user}}


async def test_on_approve__someone_else_is_told_who_decides_and_the_run_waits(
    services: Services,
) -> None:
    run = await _ask(services)
    ack, respond = FakeAck(), FakeRespond()

    await buttons.on_approve(ack=ack, body=_click(run.pending_token or "", OTHER),
                               respond=respond, context=await _context(services))
    await services.drain(timeout=30)

    assert ack.calls == [{}]
    assert respond.texts == [f"You can't decide this request: only <@{REP}> can. Nothing changed."]
    after = await runs.get(services.rt.db, run.id)
    assert after.state is RunState.suspended and after.pending_token == run.pending_token


async def test_on_approve__the_requester_approves_and_the_run_goes_on_to_its_answer(
    services: Services,
) -> None:
    run = await _ask(services)
    ack, respond = FakeAck(), FakeRespond()

    await buttons.on_approve(ack=ack, body=_click(run.pending_token or "", REP),
                               respond=respond, context=await _context(services))
    await services.drain(timeout=30)

    assert ack.calls == [{}]
    assert respond.calls == []  # the card update goes through the outbox, not the reply
    assert (await runs.get(services.rt.db, run.id)).state is RunState.answered


async def test_on_approve__a_second_click_is_told_it_was_already_approved(
    services: Services,
) -> None:
    run = await _ask(services)
    context = await _context(services)
    await buttons.on_approve(ack=FakeAck(), body=_click(run.pending_token or "", REP),
                               respond=FakeRespond(), context=context)
    await services.drain(timeout=30)
    respond = FakeRespond()

    await buttons.on_approve(ack=FakeAck(), body=_click(run.pending_token or "", REP),
                               respond=respond, context=context)

    [text] = respond.texts
    assert text.startswith(f"This request was already approved by <@{REP}> <!date^")
    assert (await runs.get(services.rt.db, run.id)).state is RunState.answered


async def test_on_command__help_is_answered_in_the_ack_without_the_store(
    services: Services,
) -> None:
    ack, respond = FakeAck(), FakeRespond()

    await commands.on_command(ack=ack, command={"text": "help", "user_id": REP},
                              respond=respond, context=await _context(services))

    [answer] = ack.calls
    assert answer["response_type"] == "ephemeral" and "`/signoff ask &lt;question&gt;`" in answer[
        "text"]
    assert respond.calls == []
    assert await runs.list_runs(services.rt.db) == []


def test_services_of__a_context_without_the_middleware_is_refused() -> None:
    with pytest.raises(LookupError, match=r"build the app with bot\.bolt_app\.build"):
        Services.of(AsyncBoltContext())
