"""Ask: a person (or an agent) starts a run; it is recorded first (with its route), then driven."""

from __future__ import annotations

import secrets

from resume import routes
from resume.apps import SNAPSHOT_VERSION
from resume.drive import Drive
from resume.messages import Message
from resume.outcomes import Asked
from resume.runtime import Runtime
from store import runs
from store.events import EventKind
from store.transitions import Effects

#: Longest question accepted; the whole question is shown on every approval card.
MAX_QUESTION_CHARS = 4000


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


async def ask(rt: Runtime, user_id: str, question: str) -> Asked:
    """Create a running run held by this process; ``asked.drive.go()`` carries it on.

    A blank or oversized question raises ValueError and creates nothing.

    With a router, its route function is called here (once per run): a caller
    that must answer quickly (a Slack handler) acks before calling this.
    """
    question = question.strip()
    if not question:
        raise ValueError("a run needs a question")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"the question is {len(question)} characters; the limit is "
                         f"{MAX_QUESTION_CHARS}")
    scope = await rt.app.scope(user_id)
    # Routed once, here, and recorded with the run: a drive cut short in its first model
    # call (crash, model error) must find the route, not ask the route function again.
    # The route function may be a model call; nothing transactional is open yet.
    choice = (await routes.choose(rt.app.router, question, user_id)
              if rt.app.router is not None else None)
    now = rt.now()
    new = runs.NewRun(
        id=new_run_id(), user_id=user_id, question=question,
        limits=rt.app.limits.model_dump(), owner_id=rt.owner_id,
        snapshot_version=SNAPSHOT_VERSION, app_fingerprint=rt.app.fingerprint(),
        scope_snapshot=scope.model_dump(mode="json"), scope_resolved_at=now,
        slack_channel=None, route=choice.route if choice else None,
    )
    fx = Effects(messages=[Message.user(question).model_dump(mode="json")],
                 events=[(EventKind.started, {"user": user_id, "app": rt.app.name,
                                      "limits": new.limits})])
    if choice is not None:
        fx.events.append((choice.kind, choice.data))
    run = await runs.create(rt.db, new, now=now, fx=fx)
    return Asked(run, Drive(rt, run))
