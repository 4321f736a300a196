"""Deploy safety: a run saved by an older snapshot version is migrated, or fails loudly."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from resume import apps, outcomes
from resume.apps import SNAPSHOT_VERSION
from resume.messages import Message
from store import events, outbox, records, runs
from store.engine import Database
from store.events import EventKind
from store.records import Run
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK, QuotesWorld, quotes_world

OLD = SNAPSHOT_VERSION - 1


async def _saved_by_older_code(db: Database, version: int) -> tuple[QuotesWorld, Run]:
    """A suspended run as version ``OLD`` stored it: the pending arguments under "arguments"."""
    world = await quotes_world(db)
    run = await journeys.start(world.rt, "U_REP", ASK)
    assert run.state is RunState.suspended and run.pending is not None
    pending = {k: v for k, v in run.pending.items() if k != "args"}
    pending["arguments"] = run.pending["args"]
    async with db.write() as conn:
        await conn.execute(runs.RUNS.update().where(runs.RUNS.c.id == run.id).values(
            snapshot_version=version, pending=records.dumps(pending, what="pending")))
    return world, run


def _renames_arguments(seen: list[int]) -> apps.Migration:
    def migration(old: apps.Snapshot, conversation: Sequence[Message]) -> apps.Snapshot:
        seen.append(len(conversation))
        pending = dict(old.pending or {})
        pending["args"] = pending.pop("arguments")
        return dataclasses.replace(old, pending=pending)

    return migration


async def test_snapshot__an_older_supported_version_is_migrated_then_resumed(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, run = await _saved_by_older_code(db, OLD)
    seen: list[int] = []
    monkeypatch.setattr(apps, "MIGRATIONS", {OLD: _renames_arguments(seen)})
    assert apps.supported_versions() == {OLD, SNAPSHOT_VERSION}

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")

    assert isinstance(result, outcomes.Executed)
    after = await runs.get(db, run.id)
    assert after.state is RunState.answered, after.halt_reason
    assert after.snapshot_version == SNAPSHOT_VERSION and after.pending == run.pending
    [migrated] = await events.for_run(db, run.id, kind=EventKind.snapshot_migrated)
    assert migrated.data == {"from": OLD, "to": SNAPSHOT_VERSION}
    assert seen == [6]  # migrated once, reading the conversation as stored
    assert await world.crm.sent_count("Henderson") == 1


@pytest.mark.parametrize("version", [OLD, SNAPSHOT_VERSION + 1])
async def test_snapshot__an_unsupported_version_fails_snapshot_incompatible(
    db: Database, version: int,
) -> None:
    world, run = await _saved_by_older_code(db, version)
    assert apps.MIGRATIONS == {}

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")

    assert isinstance(result, outcomes.Stopped)
    after = await runs.get(db, run.id)
    assert after.state is RunState.failed and after.halt_reason == "snapshot_incompatible"
    assert after.snapshot_version == version
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert notice["event"] == "failed" and notice["reason"] == "snapshot_incompatible"
    assert f"snapshot version {version}" in notice["detail"]
    assert await events.for_run(db, run.id, kind=EventKind.snapshot_migrated) == []
    assert await world.crm.sent_count() == 0


async def test_snapshot__a_failing_migration_fails_the_run_not_the_caller(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, run = await _saved_by_older_code(db, OLD)

    def broken(old: apps.Snapshot, conversation: Sequence[Message]) -> apps.Snapshot:
        raise KeyError("discount")

    monkeypatch.setattr(apps, "MIGRATIONS", {OLD: broken})

    result = await journeys.resume_after_confirmation(
        world.rt, run.pending_token or "", "approve", "U_REP")

    assert isinstance(result, outcomes.Stopped)
    assert result.run.halt_reason == "snapshot_incompatible"
    notice = (await outbox.for_run(db, run.id))[-1].payload
    assert "KeyError" in notice["detail"] and "discount" in notice["detail"]
    assert await world.crm.sent_count() == 0


async def test_snapshot__migrations_chain_oldest_first_up_to_the_current_version(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _world, run = await _saved_by_older_code(db, OLD)
    applied: list[int] = []

    def step(version: int) -> apps.Migration:
        def migration(
            old: apps.Snapshot, conversation: Sequence[Message]
        ) -> apps.Snapshot:
            applied.append(version)
            limits: dict[str, Any] = {**old.limits, "seen": [*old.limits.get("seen", []), version]}
            return dataclasses.replace(old, limits=limits)
        return migration

    monkeypatch.setattr(apps, "SNAPSHOT_VERSION", 4)
    monkeypatch.setattr(apps, "MIGRATIONS", {1: step(1), 2: step(2), 3: step(3)})
    assert apps.supported_versions() == {1, 2, 3, 4}

    migrated = apps.migrate_snapshot(dataclasses.replace(run, snapshot_version=2), [])

    assert applied == [2, 3] and migrated.snapshot.limits["seen"] == [2, 3]
    assert migrated.event() == {"from": 2, "to": 4} and migrated.values["snapshot_version"] == 4
