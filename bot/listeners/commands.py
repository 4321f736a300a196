"""`/signoff`: ask, continue, status, list, cancel, help.

Replies are ephemeral. Those that need no database (help, usage errors) go
back in the ack itself; the rest ack first and answer through the
response_url, so a slow database never costs the 3-second window. Starting
a run records it before the reply and drives it in the background;
`continue` records the grant and replies with it at once; the continued
run is driven in the background, like a new one.

Someone else's run id gets the same reply as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot import ids, replies
from bot.services import Services
from resume import ask, cancel, grant, outcomes
from store import errors, runs
from store.states import RunState

#: Runs `/signoff list` reads (the reply shows fewer and counts the rest).
LIST_READ = 100

Handler = Callable[[Services, str, str], Awaitable[str]]


def parse(text: str) -> tuple[str, str]:
    """`"ask  draft a quote"` -> `("ask", "draft a quote")`; empty text is `help`."""
    word, _, rest = (text or "").strip().partition(" ")
    return (word.lower() or "help"), rest.strip()


def register(app: AsyncApp, services: Services) -> None:
    async def on_command(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        async with services.tracked():
            sub, rest = parse(str(command.get("text") or ""))
            user = str(command["user_id"])
            immediate = _without_database(sub, rest)
            if immediate is not None:
                await ack(text=immediate, response_type="ephemeral")
                return
            await ack()
            try:
                text = await _HANDLERS[sub](services, user, rest)
            except errors.DatabaseUnavailable:
                text = replies.unavailable()
            await respond(text=text, response_type="ephemeral", replace_original=False)

    app.command(ids.COMMAND)(on_command)


def _without_database(sub: str, rest: str) -> str | None:
    """The reply when it needs no database (help, usage errors); None otherwise."""
    if sub == "help":
        return replies.help_reply()
    if sub not in _HANDLERS:
        return replies.unknown_subcommand(sub)
    if sub == "ask" and not rest:
        return replies.missing_question()
    if sub == "ask" and len(rest) > ask.MAX_QUESTION_CHARS:
        return replies.question_too_long(len(rest), ask.MAX_QUESTION_CHARS)
    if sub in ("continue", "status", "cancel") and not rest:
        return replies.missing_run_id(sub)
    return None


def _run_id(rest: str) -> str:
    """The first word: `/signoff status run_ab12 please` still names `run_ab12`."""
    return rest.split()[0].strip("`<>")


async def _ask(services: Services, user: str, question: str) -> str:
    asked = await ask.ask(services.rt, user, question)
    services.spawn(asked.drive.go(), name=f"drive:{asked.run.id}")
    return replies.asked(asked.run)


async def _continue(services: Services, user: str, rest: str) -> str:
    """Grant now, reply with the grant; the run goes on in the background."""
    run_id = _run_id(rest)
    result = await grant.grant_continue(services.rt, run_id, user)
    if isinstance(result, outcomes.ContinueRefused):
        if result.reason == "not_halted":
            return replies.not_halted(run_id, await _state(services, run_id))
        return replies.run_not_found(run_id)
    services.spawn(result.drive.go(), name=f"drive:{run_id}")
    services.kick()
    return replies.continued(result.run, result.new_limits)


async def _status(services: Services, user: str, rest: str) -> str:
    run_id = _run_id(rest)
    run = await runs.find(services.rt.db, run_id)
    if run is None or run.user_id != user:
        return replies.run_not_found(run_id)
    return replies.status(run)


async def _list(services: Services, user: str, rest: str) -> str:
    found = await runs.list_runs(services.rt.db, states=[RunState.suspended, RunState.halted],
                                 user_id=user, limit=LIST_READ)
    return replies.runs_list(found)


async def _cancel(services: Services, user: str, rest: str) -> str:
    run_id = _run_id(rest)
    result = await cancel.cancel(services.rt, run_id, user)
    if isinstance(result, outcomes.Cancelled):
        services.kick()
        return replies.cancelled(result.run)
    if result.reason == "not_found":
        return replies.run_not_found(run_id)
    return replies.not_cancellable(run_id, await _state(services, run_id))


async def _state(services: Services, run_id: str) -> str | None:
    run = await runs.find(services.rt.db, run_id)
    return run.state.value if run is not None else None


_HANDLERS: dict[str, Handler] = {
    "ask": _ask,
    "continue": _continue,
    "status": _status,
    "list": _list,
    "cancel": _cancel,
}
