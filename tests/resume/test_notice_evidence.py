"""Failure and halt notices carry what the run did, from the ledger.

A run that failed after its approved `send_quote` succeeded must say the quote
was sent and must not tell the requester to ask again (that sends a second
quote). Driven through resume with the quotes example, on both dialects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bot import cards
from bot.cards import message
from examples import quotes
from examples.crm import CRM
from resume import reap
from resume.messages import Message, ToolSpec
from resume.outbox import RunNotice
from resume.runtime import Runtime
from resume.scripted import ScriptedModel, Turn
from store import outbox, runs
from store.engine import Database
from store.states import RunState
from tests import journeys
from tests.quotes_harness import ASK


class Crash(BaseException):
    """Stands in for a kill: no handler in the loop catches it, so the run stays running."""


def _dies_after_sending(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Turn:
    """The quotes agent, killed on the model call that follows a sent quote."""
    if messages[-1].role == "tool" and messages[-1].name == "send_quote":
        raise Crash
    return quotes.quote_script(messages, tools)


async def _notice_text(db: Database, run_id: str) -> tuple[RunNotice, str]:
    payload = (await outbox.for_run(db, run_id))[-1].payload
    notice = RunNotice.model_validate(payload)
    text, blocks = cards.run_notice(notice)
    return notice, "\n".join([text, *message.texts(blocks)])


async def test_recovery_exhausted_after_send_quote_says_it_was_sent(db: Database) -> None:
    crm = CRM(db)
    await crm.setup()
    rt = Runtime(db=db, app=quotes.build(crm, ScriptedModel(_dies_after_sending)),
                 owner_id="proc_dying", max_recovery_attempts=0)
    run = await journeys.start(rt, "U_REP", ASK)
    assert run.pending_token
    try:
        await journeys.resume_after_confirmation(rt, run.pending_token, "approve", "U_REP")
    except Crash:
        pass
    else:
        raise AssertionError("the model call after send_quote should have died")
    held = await runs.get(db, run.id)
    assert held.state is RunState.running
    assert await runs.heartbeat(db, run.id, held.lease_epoch,
                                now=datetime.now(UTC) - timedelta(hours=1))

    report = await reap.recover_orphans(rt)

    assert [r.id for r in report.exhausted] == [run.id]
    assert (await runs.get(db, run.id)).halt_reason == "recovery_exhausted"
    notice, text = await _notice_text(db, run.id)
    sent = [e for e in notice.evidence if e.tool == "send_quote"]
    assert [(e.status, e.confirmed) for e in sent] == [("succeeded", True)]
    assert "`send_quote` ran and succeeded, so that was done" in text
    assert "ask again" not in text.lower().replace("don't ask again", "")
    assert "Don't ask again: that would do it a second time." in text
    assert "signoff runs show" not in text
