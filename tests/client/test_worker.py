"""The resume worker end to end: each agent is a process that pauses and exits; `signoff-worker`,
another process, resumes it once a person decides. One `signoff serve` for the module.

Each test counts refunds in its payments file (the number a user cares about) and reads how
the run ended from the API.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from signoff_client import Signoff
from signoff_client.adapters.pauses import FilePauses, PauseRecord
from standardwebhooks import Webhook

from tests.acceptance import replicas
from tests.client import harness
from tests.client.refunds import Payments
from tests.client.worker_procs import (
    NO_RESCAN,
    WorkerProcess,
    cleared,
    environment,
    paused_agent_and_worker,
    start_agent,
    webhook_key,
)
from tests.conftest import PostgresServer

pytestmark = pytest.mark.asyncio(loop_scope="module")
ADAPTERS = ["pydantic_ai", "openai_agents", "langgraph"]


@pytest.fixture(name="served")
def shared_server(module_server: harness.Served) -> harness.Served:
    return module_server


async def run_info(served: harness.Served, run_id: str,
                   api_key: str | None = None) -> dict[str, Any]:
    async with Signoff(served.url, api_key=api_key or served.api_key) as so:
        _, info = await so.api.request("GET", f"/runs/{run_id}")
    assert isinstance(info, dict)
    return info


def pause_file(workdir: Path, run_id: str) -> Path:
    return workdir / "paused" / f"{run_id}.json"


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_worker__resumes_the_exited_agent_once_and_a_replayed_pause_runs_nothing_again(
        served: harness.Served, payments: Payments, tmp_path: Path, adapter: str) -> None:
    async with paused_agent_and_worker(served, tmp_path, adapter, f"approve-{adapter}") as it:
        kept = it.pause.read_bytes()
        await served.approve(await it.card())
        await it.resumed()  # woken by its long-poll: nothing else would, in time
        assert await it.worker.stop() == 0, it.worker.output()
        assert "worker stopped" in it.worker.output()

        it.pause.write_bytes(kept)  # the same pause again, as if the first resume were lost
        it.restart()
        await it.resumed()
        assert await it.worker.stop() == 0, it.worker.output()
        info = await it.run_info()

    (refund,) = payments.refunds()
    assert info["state"] == "answered"
    assert refund["id"] in (info.get("answer") or ""), info


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_worker__a_decline_resumes_the_agent_without_running_the_tool(
        served: harness.Served, payments: Payments, tmp_path: Path, adapter: str) -> None:
    async with paused_agent_and_worker(served, tmp_path, adapter, f"decline-{adapter}") as it:
        await served.decline(await it.card(), "needs a manager")
        await it.resumed()
        log = await it.worker.logged(f"run {it.run_id} resumed")
        info = await it.run_info()

    assert payments.refunds() == []
    assert info["state"] == "failed", "refund_order never ran, so the run is not answered"
    (resumed,) = [line for line in log.splitlines() if f"run {it.run_id} resumed" in line]
    assert "needs a manager" in resumed.split("the agent answered", 1)[1], resumed


async def test_worker__a_failure_after_the_agent_ended_keeps_the_pause_until_the_run_is_finished(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(served, tmp_path, "pydantic_ai", "answer-raises",
                                       WORKER_BROKEN_ANSWER="pydantic_ai") as it:
        await served.approve(await it.card())
        await it.worker.logged(f"run {it.run_id}: resuming it with the pydantic_ai agent "
                               "'refunds-pai' failed; left paused")
        assert it.pause.exists(), "the run is not finished, so its pause must stay"
        assert (await it.run_info())["state"] not in ("answered", "failed")

        del it.env["WORKER_BROKEN_ANSWER"]
        it.restart()
        await it.resumed()
        info = await it.run_info()

    assert len(payments.refunds()) == 1, "the claim ran the refund once across both resumes"
    assert info["state"] == "answered"


async def test_worker__a_run_cancelled_on_signoff_is_not_resumed_and_its_pause_is_cleared(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(served, tmp_path, "openai_agents", "cancelled") as it:
        async with Signoff(served.url, api_key=served.api_key) as so:
            await so.api.request("POST", f"/runs/{it.run_id}/cancel", json={})
        await it.resumed()
        log = await it.worker.logged(f"run {it.run_id} is failed on signoff already; not "
                                     "resumed, its pause cleared")

    assert f"run {it.run_id} resumed" not in log, "the agent's model ran after the cancel"
    assert payments.refunds() == []


async def test_worker__a_first_format_pause_is_resumed_and_its_run_left_open(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(served, tmp_path, "pydantic_ai", "legacy") as it:
        record = json.loads(it.pause.read_bytes())
        it.pause.write_text(json.dumps({"calls": record["calls"], **record["state"]}))
        # A store of the first format is there when the worker starts: the running one may
        # have read the record already.
        it.restart()
        await it.worker.logged("worker started", times=2)
        await served.approve(await it.card())
        await it.resumed()
        await it.worker.logged(f"run {it.run_id} resumed by the pydantic_ai agent "
                               "'refunds-pai'; its pause record is of the first format")
        info = await it.run_info()

    assert len(payments.refunds()) == 1
    assert info["state"] not in ("answered", "failed"), "nobody knows what the run requires"


async def test_worker__a_pass_while_signoff_is_down_gives_each_run_read_seconds_and_stops(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{replicas.free_port()}"  # nothing listens: every read retries
    env = environment(served, tmp_path, SIGNOFF_URL=down, WORKER_READ_SECONDS="1",
                      WORKER_ADAPTERS="pydantic_ai", WORKER_RESCAN_SECONDS=NO_RESCAN)
    pauses = FilePauses(tmp_path / "paused")
    for n in range(3):
        record = PauseRecord(run_id=f"run_down_{n}", adapter="pydantic_ai",
                             agent="refunds-pai", calls=["c1"], state={"messages": "[]"})
        pauses.save(record.run_id, record.to_bytes())
    worker = WorkerProcess.start(env, tmp_path / "worker.log")
    try:
        for n in range(3):  # without the bound, the first read alone retries for 300 s
            await worker.logged(f"run run_down_{n}: signoff did not answer within 1s; "
                                "looked at again next pass")
        assert await worker.stop() == 0, worker.output()
    finally:
        worker.kill()

    assert "worker stopped" in worker.output()
    assert sorted(pauses.paused()) == ["run_down_0", "run_down_1", "run_down_2"]


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_worker__an_approval_of_an_old_preview_gets_changed_and_runs_once_fresh(
        served: harness.Served, payments: Payments, tmp_path: Path, adapter: str) -> None:
    async with paused_agent_and_worker(served, tmp_path, adapter, f"changed-{adapter}") as it:
        first = await it.card()
        payments.set_total("A-1", 25.0)
        await served.approve(first)
        second = await harness.diff_card(served, first)
        assert payments.refunds() == [], "the approval of the old details ran nothing"
        await served.approve(second)
        await it.answered_with_one_refund(payments)


async def test_worker__killed_mid_wait_and_restarted_the_decision_lands_once(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(served, tmp_path, "openai_agents", "killed") as it:
        it.worker.kill()  # SIGKILL while it long-polls
        await served.approve(await it.card())
        it.restart()
        await it.answered_with_one_refund(payments)


async def test_worker__an_expired_call_resumes_the_agent_told_it_expired(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(served, tmp_path, "pydantic_ai", "expired",
                                       WORKER_TTL_MINUTES="0.05") as it:
        await it.resumed()
        log = await it.worker.logged(f"run {it.run_id} resumed")
        info = await it.run_info()

    assert payments.refunds() == []
    assert info["reason"] == "suspension_expired"
    assert "the approval request expired before anyone decided" in log


async def test_worker__one_run_resumes_while_others_raise_have_no_agent_or_no_run(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    env = environment(served, tmp_path, WORKER_RESCAN_SECONDS="1",
                      WORKER_ADAPTERS="pydantic_ai,openai_agents",
                      WORKER_BROKEN="openai_agents")
    orphan = await start_agent(env, "langgraph", "mixed-unregistered")
    gone = PauseRecord(run_id="run_gone", adapter="pydantic_ai", agent="refunds-pai",
                       calls=["c1"], state={"messages": "[]"})
    FilePauses(tmp_path / "paused").save(gone.run_id, gone.to_bytes())
    unreadable = tmp_path / "paused" / "run_unreadable.json"
    unreadable.mkdir()  # load() raises, even as root; the oldest, so it comes first each pass
    os.utime(unreadable, (0, 0))
    worker = WorkerProcess.start(env, tmp_path / "worker.log")
    try:
        await worker.logged("run run_gone cannot be resumed: signoff has no such run or call "
                            "for this worker's API key; left paused")
        await worker.logged(f"run {orphan['run_id']} cannot be resumed: it is paused for "
                            "agent 'refunds-lg' (langgraph), which this worker has not "
                            "registered; left paused")
        card = await served.wait_for_card("refund_order", orphan["run_id"])
        await served.decline(card, "not now")
        broken = await start_agent(env, "openai_agents", "mixed-broken")
        await served.approve(await served.wait_for_card("refund_order", broken["run_id"]))
        await worker.logged(f"run {broken['run_id']}: resuming it with the openai_agents "
                            "agent 'refunds-oai' failed; left paused")
        healthy = await start_agent(env, "pydantic_ai", "mixed-healthy")
        await served.approve(await served.wait_for_card("refund_order", healthy["run_id"]))
        await cleared(pause_file(tmp_path, healthy["run_id"]), worker)
        assert await worker.stop() == 0, worker.output()
        log = worker.output()
    finally:
        worker.kill()

    assert pause_file(tmp_path, orphan["run_id"]).exists()
    assert pause_file(tmp_path, broken["run_id"]).exists(), "a failed resume stays paused"
    assert (await run_info(served, healthy["run_id"]))["state"] == "answered"
    assert log.count("worker pass") == 0, log
    assert log.count("run run_gone cannot be resumed") == 1, "reported once over many passes"
    assert log.count("run run_unreadable cannot be resumed: its pause could not be read") == 1


async def test_worker__webhooks_wake_it_and_forged_or_stale_ones_are_refused(
        served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    port = replicas.free_port()
    hook = f"http://127.0.0.1:{port}/webhook"
    key, secret = webhook_key(served, hook)
    env = environment(served, tmp_path, api_key=key, WORKER_RESCAN_SECONDS=NO_RESCAN,
                      SIGNOFF_WEBHOOK_SECRET=secret)
    paused = await start_agent(env, "pydantic_ai", "webhooks")
    worker = WorkerProcess.start(env, tmp_path / "worker.log", "--webhook-port", str(port))
    try:
        await worker.logged("webhook receiver on")
        body = json.dumps({"type": "call.decided", "timestamp": 0, "data": {
            "run_id": paused["run_id"], "call_id": paused["calls"][0], "status": "approved"}})
        now, old = datetime.now(UTC), datetime.now(UTC) - timedelta(hours=1)
        async with httpx.AsyncClient() as http:
            forged = await http.post(hook, content=body, headers={
                "webhook-id": "msg_forged", "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Webhook("whsec_" + "A" * 44).sign("msg_forged", now,
                                                                     body)})
            stale = await http.post(hook, content=body, headers={
                "webhook-id": "msg_stale", "webhook-timestamp": str(int(old.timestamp())),
                "webhook-signature": Webhook(secret).sign("msg_stale", old, body)})
            unsigned = await http.post(hook, content=body)
        assert [r.status_code for r in (forged, stale, unsigned)] == [401, 401, 401]
        assert worker.output().count("webhook refused") == 3
        assert payments.refunds() == [] and pause_file(tmp_path, paused["run_id"]).exists()

        await served.approve(await served.wait_for_card("refund_order", paused["run_id"]))
        await cleared(pause_file(tmp_path, paused["run_id"]), worker)  # only a webhook wakes it
    finally:
        worker.kill()

    assert len(payments.refunds()) == 1
    assert (await run_info(served, paused["run_id"], key))["state"] == "answered"


@pytest.fixture
def postgres_db(postgres_server: PostgresServer) -> str:
    """A database at head (sync: the PostgreSQL helpers run their own event loop)."""
    url = postgres_server.create_database()
    harness.signoff_cli(url, "db", "upgrade")
    return url


@pytest_asyncio.fixture(loop_scope="function")
async def postgres_served(postgres_db: str, tmp_path: Path) -> AsyncIterator[harness.Served]:
    async with harness.served(postgres_db, tmp_path) as server:
        yield server


@pytest.mark.postgres
@pytest.mark.asyncio(loop_scope="function")
async def test_worker__on_postgres_resumes_the_exited_agent_once(
        postgres_served: harness.Served, payments: Payments, tmp_path: Path) -> None:
    async with paused_agent_and_worker(postgres_served, tmp_path, "langgraph", "pg") as it:
        await postgres_served.approve(await it.card())
        await it.answered_with_one_refund(payments)


async def test_example__the_worker_resumes_the_three_example_agents_after_they_exit(
        served: harness.Served, tmp_path: Path) -> None:
    # A key of its own: the cards it approves are its three runs', not an earlier test's.
    served = served.with_own_key("example")
    env = environment(served, tmp_path, PYTHONPATH=str(replicas.REPO),
                      REFUNDS_DEMO_FILE=str(tmp_path / "refunds-demo.json"),
                      SIGNOFF_REQUESTER=harness.REQUESTER)
    for kind in ADAPTERS:
        started = await example("start", kind, env=env, cwd=tmp_path)
        assert "paused on" in started, started
    worker = WorkerProcess.start(env, tmp_path / "worker.log", cwd=tmp_path,
                                 target="examples.worker:worker")
    try:
        await worker.logged("worker started")
        cards = await replicas.until(lambda: _open_cards(served, len(ADAPTERS)), timeout=30,
                                     what="the three cards")
        for card in cards:
            await served.approve(card)
        log = await worker.logged("the run is answered", times=3)
    finally:
        worker.kill()

    refunds = json.loads((tmp_path / "refunds-demo.json").read_text())["refunds"]
    assert len(refunds) == 3, log
    assert not list((tmp_path / "paused").glob("*.json"))


async def _open_cards(served: harness.Served, n: int) -> list[Any]:
    cards = served.cards()
    return cards if len(cards) >= n else []


async def example(*args: str, env: dict[str, str], cwd: Path) -> str:
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "examples.worker", *args], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
