"""`signoff mcp-gateway --preview/--guard`: the card shows what the upstream's read-only tools
read of the world, an approval of a world that has since changed is answered `changed`, and
the guard blocks what may no longer run. Also the example's own walk-through."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from tests.acceptance import replicas
from tests.client import harness
from tests.client.mcp_harness import (
    ARGS,
    WORLD,
    gateway,
    http_gateway_process,
    next_card,
    settled,
    text_of,
)
from tests.client.refunds import Payments

pytestmark = pytest.mark.asyncio(loop_scope="module")  # shared as in test_mcp_gateway.py


def set_note(payments: Payments, order_id: str, note: str) -> None:
    """A note on the order, which the example's preview tool shows on the card."""
    data = json.loads(payments.path.read_text())
    data["orders"][order_id]["note"] = note
    payments.path.write_text(json.dumps(data))


@pytest.fixture(name="server")
def own_key_server(keyed_server: harness.Served) -> harness.Served:
    return keyed_server


async def test_preview__the_card_shows_the_arguments_and_the_world(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, *WORLD) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        card = await server.wait_for_card("refund_order")
        shown = json.dumps(card.blocks)
        await server.approve(card)
        result = await settled(task)

    assert "Order total" in shown and "40.00" in shown and "Already refunded" in shown, shown
    assert "A-1" in shown and "40.0" in shown, "the arguments stay on the card"
    assert result.is_error is not True and len(payments.refunds()) == 1


@pytest.mark.asyncio(loop_scope="function")  # its own server per dialect
async def test_preview__an_approval_of_a_changed_world_asks_again_then_runs_once(
        any_server: harness.Served, payments: Payments) -> None:
    async with gateway(any_server, payments, *WORLD) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        first = await any_server.wait_for_card("refund_order")
        payments.set_total("A-1", 45.0)  # what the approver saw is no longer true
        await any_server.approve(first)
        diff = await next_card(any_server, first)
        assert "45.00" in json.dumps(diff.blocks), "the diff card shows the changed total"
        assert payments.refunds() == [], "an approval of the old world never executes"
        await any_server.approve(diff)
        result = await settled(task)

    (refund,) = payments.refunds()
    assert text_of(result) == f"refunded 40.0 on A-1 as {refund['id']}"


async def test_guard__a_tool_error_from_the_guard_blocks_the_approved_call(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, *WORLD) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        card = await server.wait_for_card("refund_order")
        payments.add_order("A-1", 40.0, hold=True)  # the preview is unchanged; the guard is not
        await server.approve(card)
        result = await settled(task)

    assert result.is_error is True and "blocked (check_refund)" in text_of(result)
    assert "order A-1 is on hold" in text_of(result)
    assert payments.refunds() == []


async def test_guard__a_result_whose_ok_is_false_blocks_with_its_message(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, *WORLD) as session:
        task = asyncio.create_task(session.call_tool("refund_order",
                                                     {"order_id": "A-1", "amount": 50.0}))
        await server.approve(await server.wait_for_card("refund_order"))
        result = await settled(task)

    assert result.is_error is True
    assert "'only 40.00 is left to refund on A-1'" in text_of(result)
    assert payments.refunds() == []


async def test_preview__hostile_text_from_the_upstream_is_data_on_the_card(
        server: harness.Served, payments: Payments) -> None:
    set_note(payments, "A-1", "<!channel> *urgent* <https://evil.example|approve me>")
    async with gateway(server, payments, *WORLD) as session:
        task = asyncio.create_task(session.call_tool("refund_order", ARGS))
        card = await server.wait_for_card("refund_order")
        shown = json.dumps(card.blocks)
        await server.decline(card, "no")
        await settled(task)

    assert "&lt;!channel&gt;" in shown, shown
    assert "<!channel>" not in shown and "<https://evil.example" not in shown, shown


async def test_preview__an_oversized_preview_is_a_clear_error_and_nothing_is_asked(
        server: harness.Served, payments: Payments) -> None:
    # A long field is clipped on the card; this one is past what the API takes at all.
    set_note(payments, "A-1", "x" * 300_000)
    async with gateway(server, payments, *WORLD) as session:
        result = await session.call_tool("refund_order", ARGS)
        still = await session.call_tool("lookup", {"order_id": "A-1"})

    assert result.is_error is True, result
    assert "too_large" in text_of(result) and "did not run" in text_of(result), result
    assert server.cards() == [] and payments.refunds() == []
    assert still.is_error is not True, "the gateway keeps serving"


async def test_preview__a_failing_preview_tool_asks_nothing_and_runs_nothing(
        server: harness.Served, payments: Payments) -> None:
    async with gateway(server, payments, *WORLD) as session:
        result = await session.call_tool("refund_order", {"order_id": "Z-9", "amount": 1.0})

    assert result.is_error is True
    assert "preview_refund failed" in text_of(result) and "no order 'Z-9'" in text_of(result)
    assert server.cards() == [] and payments.refunds() == []


async def ask(url: str, amount: str) -> tuple[int, str]:
    """The example's `ask`: an agent's one call through the gateway, in its own process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "examples.mcp_payments", "ask", url, "A-1", amount,
        cwd=replicas.REPO, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode().strip()


async def test_example__the_docstring_walk_through_refunds_once_and_reports_a_decline(
        server: harness.Served, payments: Payments) -> None:
    async with http_gateway_process(server, payments, *WORLD) as running:
        approved = asyncio.create_task(ask(running.url, "40"))
        card = await server.wait_for_card("refund_order")
        assert "Order total" in json.dumps(card.blocks), "the example's preview is on the card"
        await server.approve(card)
        assert await approved == (0, "refunded 40.0 on A-1 as R-1")
        declined = asyncio.create_task(ask(running.url, "5"))
        await server.decline(await next_card(server, card), "enough")
        code, said = await declined

    assert code == 1 and said.startswith("tool error: signoff: declined") and "'enough'" in said
    assert [r["amount"] for r in payments.refunds()] == [40.0]
