"""The client's whole round against a real `signoff serve`: what ran, and what the agent saw."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from signoff_client import Blocked, Declined, Expired, Run, Signoff, SyncSignoff

from bot.sandbox import fake_slack
from tests.client import harness
from tests.client.refunds import Payments

# One `signoff serve` for the module: each test finds its own run's cards by the run's id.
pytestmark = pytest.mark.asyncio(loop_scope="module")
T = TypeVar("T")
ARGS = {"order_id": "A-1", "amount": 40.0}


@pytest.fixture(name="server")
def shared_server(module_server: harness.Served) -> harness.Served:
    return module_server


def client(served: harness.Served) -> Signoff:
    return Signoff(served.url, api_key=served.api_key)


def refund_call(run: Run, payments: Payments, **options: Any) -> Coroutine[Any, Any, Any]:
    return run.call("refund_order", ARGS, execute=payments.refund_order,
                    preview=payments.render, guard=payments.check,
                    reconcile=payments.find, **options)


async def settled(task: asyncio.Task[T]) -> T:
    return await asyncio.wait_for(task, timeout=60)


@asynccontextmanager
async def run_block(served: harness.Served, title: str) -> AsyncIterator[Run]:
    """A run of the requester's in the client's ``run`` block (answered with ``run.answer``)."""
    async with client(served) as so, so.run(requester=harness.REQUESTER, title=title) as run:
        yield run


async def changed_and_approved(served: harness.Served, run: Run, payments: Payments,
                               total: float) -> tuple[asyncio.Task[Any], fake_slack.Message]:
    """The refund asked for, its total changed while the card waits, the old card approved:
    the call's task and the diff card that follows."""
    task = asyncio.create_task(refund_call(run, payments))
    first = await served.wait_for_card("refund_order", run.id)
    payments.set_total("A-1", total)  # what the approver saw is no longer true
    await served.approve(first)
    return task, await harness.diff_card(served, first)


async def run_state(served: harness.Served, run_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.url) as http:
        response = await http.get(f"/api/v1/runs/{run_id}",
                                  headers={"Authorization": f"Bearer {served.api_key}"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.asyncio(loop_scope="function")  # its own server per dialect, in its own loop
async def test_round__approved_call_runs_once_and_the_run_answers(
        any_server: harness.Served, payments: Payments) -> None:
    async with client(any_server) as so:
        async with so.run(requester=harness.REQUESTER, title="Refund for ticket 4411",
                          requires=["refund_order"]) as run:
            task = asyncio.create_task(refund_call(run, payments))
            card = await any_server.wait_for_card("refund_order", run.id)
            assert payments.refunds() == [], "nothing may run before the approval"
            await any_server.approve(card)
            result = await settled(task)
            run.answer = f"refunded {result['id']}"

    (refund,) = payments.refunds()
    assert result == refund and refund["key"], result
    state = await run_state(any_server, run.id)
    assert state["state"] == "answered", state
    assert state["answer"] == f"refunded {refund['id']}"


async def test_round__declined_raises_with_the_reason_and_nothing_runs(
        server: harness.Served, payments: Payments) -> None:
    async with run_block(server, "Refund for ticket 4412") as run:
        task = asyncio.create_task(refund_call(run, payments))
        await server.decline(await server.wait_for_card("refund_order", run.id), "over the limit")
        with pytest.raises(Declined) as declined:
            await settled(task)
        run.answer = "declined"

    assert declined.value.reason == "over the limit"
    assert declined.value.changed is False
    assert payments.refunds() == []


async def test_round__expired_raises_expired_and_nothing_runs(
        server: harness.Served, payments: Payments) -> None:
    async with run_block(server, "Refund nobody looks at") as run:
        with pytest.raises(Expired):
            await asyncio.wait_for(refund_call(run, payments, ttl_minutes=0.05), timeout=60)
        run.answer = "expired"
    assert payments.refunds() == []


async def test_round__guard_failing_at_execution_raises_blocked_and_nothing_runs(
        server: harness.Served, payments: Payments) -> None:
    async with run_block(server, "Refund on a held order") as run:
        task = asyncio.create_task(refund_call(run, payments))
        card = await server.wait_for_card("refund_order", run.id)
        payments.add_order("A-1", 40.0, hold=True)  # the world changes while the card waits
        await server.approve(card)
        with pytest.raises(Blocked) as blocked:
            await settled(task)
        run.answer = "blocked"

    assert (blocked.value.code, blocked.value.reason) == ("order_on_hold", "order A-1 is on hold")
    assert payments.refunds() == []


async def test_round__changed_preview_then_declined_raises_declined_changed(
        server: harness.Served, payments: Payments) -> None:
    async with run_block(server, "Refund, total changes") as run:
        task, second = await changed_and_approved(server, run, payments, 25.0)
        assert "25.00" in str(second.blocks), "the new card shows the changed total"
        assert payments.refunds() == [], "an approval of old details never executes"
        await server.decline(second, "total changed, not refunding")
        with pytest.raises(Declined) as declined:
            await settled(task)
        run.answer = "declined after change"

    assert declined.value.changed is True
    assert declined.value.reason == "total changed, not refunding"
    assert payments.refunds() == []


async def test_round__changed_preview_then_approved_runs_once(
        server: harness.Served, payments: Payments) -> None:
    async with run_block(server, "Refund, approved twice") as run:
        task, second = await changed_and_approved(server, run, payments, 30.0)
        await server.approve(second)
        result = await settled(task)
        run.answer = "refunded"

    assert payments.refunds() == [result]


async def test_restart__the_same_call_again_returns_the_recorded_result_without_running(
        server: harness.Served, payments: Payments) -> None:
    key = "ticket-4413"
    async with client(server) as so:
        run = await so.start_run(requester=harness.REQUESTER, title="Refund 4413",
                                 idempotency_key=key)
        task = asyncio.create_task(refund_call(run, payments))
        await server.approve(await server.wait_for_card("refund_order", run.id))
        first = await settled(task)

    # A new agent process: a new client, the same run key, the same call.
    async with client(server) as so:
        again = await so.start_run(requester=harness.REQUESTER, title="Refund 4413",
                                   idempotency_key=key)
        assert again.id == run.id
        second = await asyncio.wait_for(refund_call(again, payments), timeout=30)

    assert second == first
    assert len(payments.refunds()) == 1


async def test_decorator__a_gated_plain_function_does_the_round(
        server: harness.Served, payments: Payments) -> None:
    async with client(server) as so:
        refund_order = so.requires_approval(preview=payments.render, guard=payments.check,
                                            reconcile=payments.find)(payments.refund_order)
        async with so.run(requester=harness.REQUESTER, title="Refund via decorator",
                          requires=["refund_order"]) as run:
            task = asyncio.create_task(refund_order("A-1", amount=40.0))
            await server.approve(await server.wait_for_card("refund_order", run.id))
            result = await settled(task)
            run.answer = "done"

    assert payments.refunds() == [result]
    assert (await run_state(server, run.id))["state"] == "answered"


async def test_run__an_exception_in_the_block_cancels_the_run(
        server: harness.Served, payments: Payments) -> None:
    async with client(server) as so:
        with pytest.raises(RuntimeError, match="agent crashed"):
            async with so.run(requester=harness.REQUESTER, title="Gives up") as run:
                raise RuntimeError("agent crashed")
    state = await run_state(server, run.id)
    assert state["state"] != "running", state
    assert state["state"] != "answered", state


async def test_sync_face__a_blocking_agent_does_the_round(
        server: harness.Served, payments: Payments) -> None:
    started: queue.Queue[str] = queue.Queue()  # the run's id, to find its card by

    def blocking_agent() -> tuple[Any, str]:
        with SyncSignoff(server.url, api_key=server.api_key) as so:
            refund_order = so.requires_approval(preview=payments.render, guard=payments.check,
                                                reconcile=payments.find)(payments.refund_order)
            with so.run(requester=harness.REQUESTER, title="Refund from blocking code",
                        requires=["refund_order"]) as run:
                started.put(run.id)
                result = refund_order("A-1", 40.0)
                run.answer = "refunded"
            return result, run.id

    task = asyncio.create_task(asyncio.to_thread(blocking_agent))
    started_id = await asyncio.to_thread(started.get, timeout=30)
    await server.approve(await server.wait_for_card("refund_order", started_id))
    result, run_id = await settled(task)
    assert payments.refunds() == [result]
    assert (await run_state(server, run_id))["state"] == "answered"
