"""`signoff mcp-gateway` in front of the example payments MCP server, against a real `signoff
serve`, driven by the mcp SDK's own client: what ran upstream, and what the agent read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from signoff_client.adapters.mcp_gateway import IDEMPOTENCY_META_KEY

from bot.sandbox import fake_slack
from tests.acceptance import replicas
from tests.client import harness
from tests.client.mcp_harness import (
    ARGS,
    api_get,
    calls,
    cards_of_run,
    gateway,
    http_gateway,
    http_gateway_process,
    keyed,
    ledger,
    next_card,
    said_in_slack,
    session_at,
    settled,
    text_of,
)
from tests.client.refunds import Payments

# One `signoff serve` for the module, a key of its own for each test (see ``keyed_server``);
# the tests on both dialects have their own servers, in their own loops.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="server")
def own_key_server(keyed_server: harness.Served) -> harness.Served:
    return keyed_server


async def test_gateway__lists_the_upstream_tools(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        listed = await session.list_tools()

    assert sorted(tool.name for tool in listed.tools) == [
        "check_refund", "lookup", "preview_refund", "refund_order"]


async def test_gateway__approved_call_runs_upstream_once_after_the_card(
        server: harness.Served, payments: Payments) -> None:
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS,
                                                     progress_callback=on_progress))
        card = await server.wait_for_card("refund_order")
        assert payments.refunds() == [], "nothing may run before the approval"
        card_text = json.dumps(card.blocks)
        assert "A-1" in card_text and "40.0" in card_text, card_text
        await server.approve(card)
        result = await settled(task)

    (refund,) = payments.refunds()
    assert refund["order_id"] == "A-1" and refund["amount"] == 40.0
    assert result.is_error is not True, result
    assert text_of(result) == f"refunded 40.0 on A-1 as {refund['id']}"
    assert reported, "the gateway sends progress while it waits"


async def test_gateway__declined_call_is_a_tool_error_with_the_reason(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.decline(await server.wait_for_card("refund_order"), "over the limit")
        result = await settled(task)

    assert result.is_error is True
    assert "declined" in text_of(result) and "'over the limit'" in text_of(result)
    assert payments.refunds() == []


async def test_gateway__expired_call_is_a_tool_error_and_nothing_runs(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, "--ttl-minutes", "0.05") as session:
        result = await settled(asyncio.create_task(session.call_tool("refund_order", ARGS)))

    assert result.is_error is True
    assert "expired" in text_of(result)
    assert payments.refunds() == []


async def test_gateway__ungated_tool_passes_through_without_a_card(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        result = await session.call_tool("lookup", {"order_id": "A-1"})

    found: dict[str, Any] = json.loads(text_of(result))
    assert found == {"total": 40.0, "hold": False}
    assert server.cards() == []


@pytest.mark.asyncio(loop_scope="function")  # its own server per dialect
async def test_gateway__upstream_tool_error_is_recorded_failed_and_returned_as_is(
        any_server: harness.Served, payments: Payments) -> None:
    too_much: dict[str, Any] = {"order_id": "A-1", "amount": 50.0}  # more than the order's 40.00
    async with gateway(any_server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", too_much))
        await any_server.approve(await any_server.wait_for_card("refund_order"))
        result = await settled(task)

    said = "refund of 50.00 is more than the 40.00 left on A-1"
    assert result.is_error is True and said in text_of(result), "the upstream's own answer"
    assert payments.refunds() == []
    (failed,) = await calls(any_server, "failed")
    (entry,) = ledger(any_server, failed["run_id"])
    assert (entry["tool"], entry["status"]) == ("refund_order", "failed"), entry
    assert said in json.dumps(entry["result"]), entry
    run = await api_get(any_server, f"/runs/{failed['run_id']}")
    assert (run["state"], run["reason"]) == ("failed", "incomplete"), run
    assert run["evidence"] == [], "the ledger has no succeeded call"
    assert said_in_slack(any_server, "refund_order failed"), "the thread says the call failed"
    (notice,) = said_in_slack(any_server, "failed", failed["run_id"], "Ran but did not succeed")
    assert "`refund_order` (failed)" in notice and "Never ran" not in notice, notice


async def test_gateway_over_http__approved_once_and_declined_never(
        server: harness.Served, payments: Payments) -> None:
    async with http_gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.approve(await server.wait_for_card("refund_order"))
        approved = await settled(task)
        again = asyncio.create_task(session.call_tool("refund_order",
                                                      {"order_id": "A-1", "amount": 5.0}))
        await server.decline(await server.wait_for_card("5.0"), "enough refunds")
        declined = await settled(again)

    (refund,) = payments.refunds()
    assert refund["amount"] == 40.0 and approved.is_error is not True
    assert text_of(approved) == f"refunded 40.0 on A-1 as {refund['id']}"
    assert declined.is_error is True and "'enough refunds'" in text_of(declined)


@pytest.mark.asyncio(loop_scope="function")  # its own server per dialect
async def test_resumed_agent__the_same_named_call_never_runs_twice_nor_after_a_decline(
        any_server: harness.Served, payments: Payments) -> None:
    small: dict[str, Any] = {"order_id": "A-1", "amount": 5.0}
    async with gateway(any_server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS,
                                                     meta=keyed("ticket-1")))
        await any_server.approve(await any_server.wait_for_card("40.0"))
        first = await settled(task)
        task = asyncio.create_task(session.call_tool("refund_order", small,
                                                     meta=keyed("ticket-2")))
        await any_server.decline(await any_server.wait_for_card("5.0"), "not this one")
        await settled(task)
    cards = len(any_server.cards())

    # The agent (and its host, and so the gateway) restarts and replays both calls.
    async with gateway(any_server, payments) as session:
        again = await asyncio.wait_for(
            session.call_tool("refund_order", ARGS, meta=keyed("ticket-1")), timeout=30)
        declined = await asyncio.wait_for(
            session.call_tool("refund_order", small, meta=keyed("ticket-2")), timeout=30)

    (refund,) = payments.refunds()
    assert refund["amount"] == 40.0, "the approved refund ran once, the declined one never"
    assert again.is_error is not True and text_of(again) == text_of(first)
    assert declined.is_error is True and "'not this one'" in text_of(declined)
    assert len(any_server.cards()) == cards, "nobody is asked again"


async def killed_while_waiting(served: harness.Served, payments: Payments,
                               key: str) -> fake_slack.Message:
    """The card of a call named ``key`` whose gateway was killed while the card waited."""
    async with http_gateway_process(served, payments) as first:
        async with session_at(first.url) as session:
            waiting = asyncio.create_task(session.call_tool("refund_order", ARGS,
                                                            meta=keyed(key)))
            card = await served.wait_for_card("refund_order")
            first.kill()
            await first.process.wait()
            waiting.cancel()  # the agent's side of the dead connection
            await asyncio.gather(waiting, return_exceptions=True)
    return card


async def test_resumed_agent__a_gateway_killed_while_waiting_is_joined_not_asked_again(
        server: harness.Served, payments: Payments) -> None:
    card = await killed_while_waiting(server, payments, "ticket-9")

    async with http_gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS,
                                                     meta=keyed("ticket-9")))
        await server.approve(card)  # a call asked anew would wait for a card of its own
        result = await settled(task)

    (refund,) = payments.refunds()
    assert text_of(result) == f"refunded 40.0 on A-1 as {refund['id']}"
    assert cards_of_run(server, card) == [card.ts], "the same card, not a new one"


@pytest.mark.asyncio(loop_scope="function")  # its own server per dialect
async def test_named_call__the_same_key_with_other_arguments_is_refused_and_asks_nothing(
        any_server: harness.Served, payments: Payments) -> None:
    # The gateway dies while the card waits, and the card is approved with nobody there: the
    # run is running again and its call has not run, so another call could still enter it.
    card = await killed_while_waiting(any_server, payments, "ticket-7")
    await any_server.approve(card)

    async with gateway(any_server, payments) as session:
        other = await asyncio.wait_for(session.call_tool(
            "refund_order", {"order_id": "A-1", "amount": 5.0}, meta=keyed("ticket-7")),
            timeout=30)
        more_args = await asyncio.wait_for(session.call_tool(
            "refund_order", ARGS | {"note": "x"}, meta=keyed("ticket-7")), timeout=30)
        assert payments.refunds() == [], "a refused replay runs nothing"
        ran = await settled(asyncio.create_task(
            session.call_tool("refund_order", ARGS, meta=keyed("ticket-7"))))
        again = await settled(asyncio.create_task(
            session.call_tool("refund_order", ARGS, meta=keyed("ticket-7"))))

    for refused in (other, more_args):
        assert refused.is_error is True, refused
        assert "'ticket-7' was used before for another call" in text_of(refused), refused
        assert "the tool did not run" in text_of(refused), refused
    (refund,) = payments.refunds()
    assert (refund["amount"], text_of(ran)) == (40.0, f"refunded 40.0 on A-1 as {refund['id']}")
    assert again.is_error is not True and text_of(again) == text_of(ran), "the recorded result"
    assert cards_of_run(any_server, card) == [card.ts], "nobody was asked again"
    assert any_server.cards() == []


async def test_unnamed_calls__an_equal_second_call_is_asked_for_again_not_run_unasked(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        first = await server.wait_for_card("refund_order")
        await server.approve(first)
        await settled(task)
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.decline(await next_card(server, first), "dup")
        second = await settled(task)

    assert len(payments.refunds()) == 1
    assert second.is_error is True and "'dup'" in text_of(second)


async def test_unnamed_call__abandoned_by_the_client_leaves_no_card_to_approve(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        await server.wait_for_card("refund_order")
        task.cancel()  # the host gave up on the call: the MCP client cancels the request

        async def buttons_gone() -> bool:
            return server.cards() == []

        await replicas.until(buttons_gone, timeout=30, what="the card to lose its buttons")
        (cancelled,) = await calls(server, "cancelled")

    assert cancelled["tool"] == "refund_order" and payments.refunds() == []


async def test_gateway__a_malformed_call_name_is_refused_and_nothing_is_asked(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments) as session:
        result = await session.call_tool("refund_order", ARGS,
                                         meta=keyed("x" * 181))

    assert result.is_error is True
    assert IDEMPOTENCY_META_KEY in text_of(result) and "did not run" in text_of(result)
    assert server.cards() == [] and payments.refunds() == []
