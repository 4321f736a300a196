"""What `signoff runs show` lists for a run that is over: no waiting fields, no next attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from store import engine, outbox
from tests import journeys
from tests.bot.test_cli import signoff, url  # noqa: F401  (the migrated-database fixture)
from tests.quotes_harness import ASK, quotes_world


async def test_runs_show__an_answered_run_lists_no_pending_preview_or_next_attempt(
    tmp_path: Path, url: str  # noqa: F811
) -> None:
    db = engine.connect(url)
    try:
        world = await quotes_world(db)
        run = await journeys.start(world.rt, "U0REP", ASK)
        await journeys.resume_after_confirmation(world.rt, run.pending_token or "", "approve",
                                                 "U0REP")
        # The relay delivered everything, each row leased a while ahead and then sent.
        now = datetime.now(UTC) + timedelta(seconds=1)
        while picked := await outbox.pick_due(db, now=now, limit=1,
                                              lease=timedelta(minutes=5)):
            await outbox.mark_sent(db, picked[0].id, now=now, attempts=picked[0].attempts)
    finally:
        await db.dispose()

    shown = signoff("runs", "show", run.id, cwd=tmp_path, database_url=url)

    assert shown.returncode == 0, shown.stderr
    head, _, rest = shown.stdout.partition("\n\n")
    labels = [line.split()[0] for line in head.splitlines()[1:]]
    assert labels[0] == "state" and "answered" in head.splitlines()[1]
    assert not {"pending", "preview", "expires", "token", "digest"} & set(labels)
    outbox_section = rest[rest.index("Outbox ("):].splitlines()[2:]
    assert len(outbox_section) == 3  # card, update, answer
    for line in outbox_section:
        cells = line.split()
        assert cells[2] == "sent" and cells[4] == "-", line  # NEXT: nothing is due


async def test_outbox_list_dead_and_retry__an_operator_re_posts_a_refused_card(
    tmp_path: Path, url: str  # noqa: F811
) -> None:
    db = engine.connect(url)
    try:
        world = await quotes_world(db, approvals_channel="C0GONE")
        run = await journeys.start(world.rt, "U0REP", ASK)
        now = datetime.now(UTC) + timedelta(seconds=1)
        [card] = await outbox.pick_due(db, now=now, limit=1)
        await outbox.mark_dead(db, card.id, error="channel_not_found", attempts=card.attempts)
    finally:
        await db.dispose()

    everything = signoff("outbox", "list", cwd=tmp_path, database_url=url)
    dead = signoff("outbox", "list", "--dead", cwd=tmp_path, database_url=url)
    retried = signoff("outbox", "retry", str(card.id), cwd=tmp_path, database_url=url)
    again = signoff("outbox", "retry", str(card.id), cwd=tmp_path, database_url=url)
    missing = signoff("outbox", "retry", "99999", cwd=tmp_path, database_url=url)
    after = signoff("outbox", "list", "--dead", cwd=tmp_path, database_url=url)
    helped = signoff("--help", cwd=tmp_path)

    assert everything.returncode == 0 and run.id in everything.stdout
    [line] = [ln for ln in dead.stdout.splitlines() if ln.startswith(str(card.id))]
    assert line.split()[:4] == [str(card.id), "approval_card", run.id, "dead"]
    assert line.split()[5] == "-" and "channel_not_found" in line
    assert retried.returncode == 0 and "due again" in retried.stdout
    assert again.returncode == 1 and "is pending, not dead" in again.stderr
    assert missing.returncode == 1 and "no outbox row 99999" in missing.stderr
    assert after.stdout.strip() == "no dead outbox rows"
    assert "signoff outbox list [--dead]" in helped.stdout
    assert "signoff outbox retry ID" in helped.stdout
    db = engine.connect(url)
    try:
        [row] = [r for r in await outbox.for_run(db, run.id) if r.id == card.id]
    finally:
        await db.dispose()
    assert row.state.value == "pending" and row.next_attempt_at <= datetime.now(UTC)
