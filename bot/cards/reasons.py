"""What a halt or failure reason code means, in a sentence, and what to do about it.

Codes come from `resume` (`RunNotice.reason`); people never see one without
the sentence. An unknown code still gets a sentence, naming the code.
"""

from __future__ import annotations

from typing import NamedTuple

from bot.cards import mrkdwn


class Explanation(NamedTuple):
    #: What happened, for the person who asked.
    what: str
    #: What they can do now. `{run}` is replaced by the run id, as inline code.
    todo: str
    #: What they can do once a confirmed write has run (asking again would repeat it);
    #: None: `AFTER_WRITE`.
    todo_after_write: str | None = None


_ASK_AGAIN = "Ask again with `/signoff ask` when you are ready"
_OPERATOR = "tell whoever runs signoff"

#: The advice once a confirmed write has run: anything but asking again.
AFTER_WRITE = (f"Don't ask again: that would do it a second time. If something looks wrong, "
               f"{_OPERATOR}.")

FAILURES: dict[str, Explanation] = {
    "incomplete": Explanation(
        "The run gave an answer without doing everything its route or app requires.",
        f"{_ASK_AGAIN}, or {_OPERATOR} if it keeps happening.",
    ),
    "outcome_unknown": Explanation(
        "A tool call was interrupted and signoff could not tell whether it took effect, "
        "so it stopped rather than risk doing it twice.",
        "Check the tool's own system for the result before asking again.",
        "Check the tool's own system for the result; don't ask again for what was done.",
    ),
    "recovery_exhausted": Explanation(
        "The run was interrupted too many times (the bot restarted or crashed while it worked).",
        f"{_ASK_AGAIN}, and {_OPERATOR} if it keeps happening.",
    ),
    "route_lost": Explanation(
        "The route this run was following could not be found when it resumed.",
        f"{_ASK_AGAIN}.",
    ),
    "route_table_changed": Explanation(
        "The app's routes changed while the run was paused, so it was not resumed "
        "on a route that no longer means what it did.",
        f"{_ASK_AGAIN}.",
    ),
    "snapshot_incompatible": Explanation(
        "The app changed while the run was paused (a tool was removed or its arguments "
        "changed), so it could not resume safely.",
        f"{_ASK_AGAIN}.",
    ),
    "cancelled": Explanation("The run was cancelled.", f"{_ASK_AGAIN} if you still need it."),
    "no_route": Explanation(
        "No route of the app matched the question.",
        "Rephrase the question and ask again.",
    ),
}

_CONTINUE = "Continue with `/signoff continue {run}` to grant it more."

HALTS: dict[str, Explanation] = {
    "no_longer_permitted": Explanation(
        "Your permissions changed since you asked, so the run stopped before acting.",
        "If your access is back, continue with `/signoff continue {run}`; otherwise ask again.",
        "If your access is back, continue with `/signoff continue {run}`.",
    ),
    "suspension_expired": Explanation(
        "Nobody answered the approval request in time.",
        "Continue with `/signoff continue {run}` to be asked for approval again.",
        "Continue with `/signoff continue {run}` to be asked for approval again.",
    ),
}

#: `budget:<bound>` halts: what ran out.
BUDGET_BOUNDS: dict[str, str] = {
    "steps": "its steps",
    "spend": "its spend limit",
    "spend_usd": "its spend limit",
    "tool_calls": "its tool calls",
    "time": "its time",
    "elapsed": "its time",
    "elapsed_ms": "its time",
}

#: An API run was started by its agent: `/signoff ask` would start another, hosted run.
AGENT_DECIDES = ("Nothing to do here: the agent that started this run decides whether to try "
                 "again (`/signoff ask` would start a different run).")

#: What an API run's failure means where the hosted sentence would name a route or an app.
EXTERNAL_FAILURES: dict[str, Explanation] = {
    "incomplete": Explanation(
        "The agent ended the run before every tool it requires had succeeded.", AGENT_DECIDES),
}


def failure(reason: str | None, *, external: bool = False) -> Explanation:
    """The sentence for a `failed` run's reason code."""
    if external and (reason or "") in EXTERNAL_FAILURES:
        return EXTERNAL_FAILURES[reason or ""]
    known = FAILURES.get(reason or "")
    if known is None:
        known = Explanation("The run failed.",
                            f"{_ASK_AGAIN}, or {_OPERATOR} if it keeps happening.")
    return for_agent(known) if external else known


def for_agent(why: Explanation) -> Explanation:
    """An API run's advice: never "ask again with `/signoff ask`", which starts another run."""
    return why._replace(todo=AGENT_DECIDES) if "/signoff ask" in why.todo else why


def halt(reason: str | None) -> Explanation:
    """The sentence for a `halted` run's reason code (`budget:steps`, `suspension_expired`...)."""
    code = reason or ""
    if code in HALTS:
        return HALTS[code]
    if code.startswith("budget:"):
        bound = code.removeprefix("budget:")
        named = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(bound.replace("_", " "))), 60)
        used = BUDGET_BOUNDS.get(bound, f"its {named} budget")
        return Explanation(f"The run used all of {used}.", _CONTINUE, _CONTINUE)
    return Explanation("The run was paused.", _CONTINUE, _CONTINUE)
