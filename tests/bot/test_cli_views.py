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
