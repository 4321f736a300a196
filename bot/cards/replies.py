"""What the bot says back to one person: ephemeral replies to clicks and `/signoff`.

Each reply is a small function of the facts it reports, in mrkdwn, with
anything a person typed (a question, a run id) escaped. Nothing here is ever
built from an exception's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot import ids
from bot.cards import help_text, mrkdwn, notices, reasons
from resume import outcomes
from resume.outbox import DeclineData
from store.records import Run
from store.states import RunState

#: Runs shown by `/signoff list`; the rest are counted.
LIST_MAX = 20
#: A question quoted back in a reply.
QUESTION_MAX = 200
#: A run id as typed, quoted back in a reply.
TYPED_ID_MAX = 60


def _run(run_id: str) -> str:
    return mrkdwn.code(mrkdwn.clip(run_id, TYPED_ID_MAX))


def _question(text: str) -> str:
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(text)), QUESTION_MAX)


def _usage(sub: str, args: str) -> str:
    return mrkdwn.code(f"{ids.COMMAND} {sub} {args}".rstrip())


# --- /signoff: usage ---------------------------------------------------------------


def help_reply(examples: Sequence[str] = ()) -> str:
    return help_text(examples)


def unknown_subcommand(word: str, examples: Sequence[str] = ()) -> str:
    return (f"I don't know {mrkdwn.code(mrkdwn.clip(word, TYPED_ID_MAX))}.\n\n"
            f"{help_text(examples)}")


def missing_run_id(sub: str) -> str:
    return f"Which run? Use {_usage(sub, '<run-id>')}; {_usage('list', '')} shows yours."


def missing_question() -> str:
    return (f"What should I do? Use {_usage('ask', '<question>')}, e.g. "
            f"{mrkdwn.code(f'{ids.COMMAND} ask draft a quote for Henderson, 200 of SKU-4411')}.")


def question_too_long(length: int, limit: int) -> str:
    return (f"That question is {length:,} characters; the limit is {limit:,}. "
            "Shorten it and ask again.")


def unavailable() -> str:
    return ("signoff could not reach its database just now, so nothing changed. "
            "Try again in a minute.")


# --- /signoff ask, continue, cancel ------------------------------------------------


def asked(run: Run) -> str:
    return (f":hourglass_flowing_sand: Started run {_run(run.id)}: {_question(run.question)}\n"
            f"Anything that needs approval will be posted for you; "
            f"{_usage('status', run.id)} shows where it stands.")


def run_not_found(run_id: str) -> str:
    """Also the reply for someone else's run: run ids leak nothing."""
    return (f"You have no run {_run(run_id)}. {_usage('list', '')} shows your runs "
            "waiting for approval or halted.")


def continued(run: Run, old: dict[str, Any], new: dict[str, Any]) -> str:
    """`Continuing run x. New limits: 8 → 12 steps, $1.00 → $1.50 spend.`"""
    limits = notices.grant_words({"old_limits": old, "new_limits": new})
    return (f":arrow_forward: Continuing run {_run(run.id)}."
            + (f" New limits: {limits}." if limits else ""))


_NOW = {"running": "it is running", "suspended": "it is waiting for approval",
        "answered": "it is answered", "failed": "it has ended", "halted": "it is paused"}


def not_halted(run_id: str, state: str | None = None) -> str:
    now = f" {_NOW.get(state, 'it is not paused')}" if state else " it is not paused"
    return (f"Run {_run(run_id)} cannot be continued:{now}. Only halted runs can be; "
            f"{_usage('status', run_id)} shows where it stands.")


def cancelled(run: Run) -> str:
    return f":no_entry_sign: Cancelled run {_run(run.id)}."


def not_cancellable(run_id: str, state: str | None = None) -> str:
    now = f" {_NOW.get(state, 'it has ended')}" if state else " it has ended"
    return (f"Run {_run(run_id)} cannot be cancelled:{now}. Only runs waiting for approval "
            "or halted can be.")


# --- /signoff status, list ---------------------------------------------------------

_STATE_EMOJI = {
    RunState.running: ":gear:",
    RunState.suspended: ":hourglass_flowing_sand:",
    RunState.halted: ":double_vertical_bar:",
    RunState.answered: ":white_check_mark:",
    RunState.failed: ":x:",
}


def _state_words(run: Run, declined: DeclineData | None = None) -> str:
    """Where the run stands, to follow `Run <id>`: `is waiting for approval of ...`."""
    if run.state is RunState.suspended:
        tool = (run.pending or {}).get("tool") or (run.pending or {}).get("name")
        what = f" of {mrkdwn.code(str(tool))}" if tool else ""
        until = (f", expires {mrkdwn.date(run.expires_at.timestamp())}"
                 if run.expires_at else "")
        return f"is waiting for approval{what}{until}"
    if run.state is RunState.halted:
        return f"is paused: {reasons.halt(run.halt_reason).what}"
    if run.state is RunState.failed and run.halt_reason == "cancelled":
        return f"was cancelled by {mrkdwn.mention(run.user_id)}"
    if run.state is RunState.failed and declined is not None:
        reason = _question(declined.reason or "")
        return f"was declined by {mrkdwn.mention(declined.by)}" + (f": {reason}" if reason else "")
    if run.state is RunState.failed:
        return f"failed: {reasons.failure(run.halt_reason, external=run.external).what}"
    if run.state is RunState.answered:
        return "is answered"
    return f"is {run.state.value}"


def status(run: Run, declined: DeclineData | None = None) -> str:
    """`/signoff status`; `declined` is the decline that ended a failed run, if one did."""
    emoji = ":x:" if declined is not None else _STATE_EMOJI.get(run.state, "")
    if run.state is RunState.failed and run.halt_reason == "cancelled":
        emoji = ":no_entry_sign:"
    words = _state_words(run, declined)
    lines = [
        f"{emoji} Run {_run(run.id)} {words}{'' if words.endswith('.') else '.'}",
        f">{_question(run.question)}",
        f"Steps {run.step} · spend {mrkdwn.money(run.spend_usd)} · tool calls {run.tool_calls}"
        f" · started {mrkdwn.date(run.started_at.timestamp())}",
    ]
    if run.state is RunState.halted:
        lines.append(reasons.halt(run.halt_reason).todo.replace("{run}", run.id))
    if run.state is RunState.answered and run.answer:
        lines.append(f"*Answer:* {_question(run.answer)}")
    return "\n".join(lines)


def runs_list(found: Sequence[Run]) -> str:
    if not found:
        return "You have no runs waiting for approval or halted."
    lines = ["*Your runs waiting for approval or halted:*"]
    for run in found[:LIST_MAX]:
        lines.append(f"• {_run(run.id)} {_state_words(run)} — {_question(run.question)}")
    if (rest := len(found) - LIST_MAX) > 0:
        lines.append(f"… and {rest} more")
    return "\n".join(lines)


# --- Clicks ------------------------------------------------------------------------


def refusal(refused: outcomes.Refusal) -> str:
    """Why a click (or a decline reason) changed nothing."""
    if isinstance(refused, outcomes.AlreadyResumed):
        verb = "declined" if refused.decision == "decline" else "approved"
        return (f"This request was already {verb} by {mrkdwn.mention(refused.by)} "
                f"{mrkdwn.date(refused.at.timestamp())}.")
    if isinstance(refused, outcomes.NotAnApprover):
        who = (mrkdwn.mentions(refused.approvers) if refused.approvers
               else mrkdwn.escape(mrkdwn.one_line(refused.policy)) if refused.policy
               else mrkdwn.mention(refused.requester))
        return f"You can't decide this request: only {who} can. Nothing changed."
    return _UNKNOWN[refused.reason]


def decline_form_failed() -> str:
    return ("Slack did not open the decline form in time, so nothing changed. "
            "Click Decline again.")


_UNKNOWN = {
    "unknown": "This request is not open any more, so nothing changed.",
    "expired": "This request expired, so nothing changed. Ask again with "
               f"{mrkdwn.code(f'{ids.COMMAND} ask')} or continue the run.",
    "superseded": "The details changed while this request waited: use the newer request "
                  "in this thread.",
    "closed": "This run is no longer waiting for a decision, so nothing changed.",
}
