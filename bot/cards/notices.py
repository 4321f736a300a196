"""Messages about a run's outcome, posted in its card's thread (or to the requester).

One renderer per `NoticeEvent`. Each returns a plain summary (the fallback
text) and the paragraphs of the message; `run_notice` turns those into
sections and adds a footer naming the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from slack_sdk.models.blocks import Block

from bot.cards import message, mrkdwn, reasons
from resume.outbox import EvidenceItem, NoticeEvent, RunNotice

#: The answer as the model wrote it (the run keeps it whole).
ANSWER_MAX = 2900
#: Evidence lines shown; the rest are counted.
EVIDENCE_MAX = 25
#: One evidence line, and one value in it.
EVIDENCE_LINE_MAX = 280
EVIDENCE_VALUE_MAX = 100
#: `detail` from resume, the list of tools that never ran, a grant.
DETAIL_MAX = 1000

_Rendered = tuple[str, list[str]]


def run_notice(notice: RunNotice) -> message.Message:
    """The message telling the requester how their run ended (or paused, or continued).

    Past Slack's size budget, fewer evidence lines are shown (the rest counted):
    the full trace is one command away, a notice that cannot be sent is nowhere.
    """
    most = EVIDENCE_MAX
    while True:
        try:
            return _render(notice, most)
        except message.CardTooLarge:
            if most == 0 or not notice.evidence:
                raise
            most = min(most, len(notice.evidence)) // 2


def _render(notice: RunNotice, most: int) -> message.Message:
    summary, paragraphs = _RENDERERS[notice.event](notice, most)
    blocks: list[Block] = [
        message.section(text, block=message.block_id(notice.run_id, f"notice.{notice.event}.{i}"))
        for i, text in enumerate(paragraphs)
        if text
    ]
    footer = f"Run {_run(notice)} · full trace: {mrkdwn.code(f'signoff runs show {notice.run_id}')}"
    blocks.append(
        message.context(footer, block=message.block_id(notice.run_id, f"notice.{notice.event}.run"))
    )
    return message.finish(summary, blocks)


def evidence_lines(items: list[EvidenceItem], most: int = EVIDENCE_MAX) -> list[str]:
    """`1. `complete_checkout` — order_id: O-1`: each tool that ran, in order, with key fields."""
    lines = []
    for number, item in enumerate(items[:most], start=1):
        line = f"{number}. {mrkdwn.code(item.tool)}"
        if item.status != "succeeded":
            line += f" _({mrkdwn.escape(mrkdwn.one_line(item.status))})_"
        if item.fields:
            line += " — " + ", ".join(f"{_key(k)}: {_value(v)}" for k, v in item.fields.items())
        lines.append(mrkdwn.clip(line, EVIDENCE_LINE_MAX))
    if (rest := len(items) - most) > 0:
        lines.append(f"… and {rest} more")
    return lines


def _answered(notice: RunNotice, most: int) -> _Rendered:
    answer = mrkdwn.clip(mrkdwn.escape(notice.answer or "").strip(), ANSWER_MAX)
    lead = f":white_check_mark: {_who(notice)}run {_run(notice)} answered:"
    paragraphs = [f"{lead}\n{answer or '_(no answer text)_'}", _detail(notice)]
    lines = evidence_lines(notice.evidence, most)
    if lines:
        paragraphs += _chunks("*Evidence* — the tools that ran, in order:", lines)
    return f"Run {_plain_run(notice)} answered", paragraphs


def _failed(notice: RunNotice, most: int) -> _Rendered:
    why = reasons.failure(notice.reason)
    text = f":x: {_who(notice)}run {_run(notice)} failed{_code_suffix(notice)}\n{why.what}"
    if notice.missing:
        never = ", ".join(mrkdwn.code(tool) for tool in notice.missing)
        text += "\n" + mrkdwn.clip(f"*Never ran:* {never}", DETAIL_MAX)
    paragraphs = [text, _detail(notice)]
    if lines := evidence_lines(notice.evidence, most):  # what did happen, next to what did not
        paragraphs += _chunks("*Evidence* — the tools that ran, in order:", lines)
    paragraphs.append(_todo(why.todo, notice))
    return f"Run {_plain_run(notice)} failed: {_plain_reason(notice, 'unknown')}", paragraphs


def _halted(notice: RunNotice, most: int) -> _Rendered:
    why = reasons.halt(notice.reason)
    text = f":double_vertical_bar: {_who(notice)}run {_run(notice)} paused{_code_suffix(notice)}"
    return f"Run {_plain_run(notice)} paused: {_plain_reason(notice, 'halted')}", [
        f"{text}\n{why.what}",
        _detail(notice),
        _todo(why.todo, notice),
    ]


def _expired(notice: RunNotice, most: int) -> _Rendered:
    text = (
        f":hourglass: {_who(notice)}nobody answered the approval request for run "
        f"{_run(notice)} in time, so it expired."
    )
    todo = "Ask again, or continue with `/signoff continue {run}` to ask for approval again."
    return f"Run {_plain_run(notice)}: approval request expired", [
        text,
        _detail(notice),
        _todo(todo, notice),
    ]


def _continued(notice: RunNotice, most: int) -> _Rendered:
    text = f":arrow_forward: {_who(notice)}run {_run(notice)} continues."
    if notice.grant:
        granted = " · ".join(grant_item(key, value) for key, value in notice.grant.items())
        text += "\n" + mrkdwn.clip(f"*Granted:* {granted}", DETAIL_MAX)
    return f"Run {_plain_run(notice)} continued", [text, _detail(notice)]


def _cancelled(notice: RunNotice, most: int) -> _Rendered:
    text = f":no_entry_sign: {_who(notice)}run {_run(notice)} was cancelled."
    return f"Run {_plain_run(notice)} cancelled", [text, _detail(notice)]


def _call_ran(notice: RunNotice, most: int) -> _Rendered:
    """An external agent reported what its approved call did."""
    text = f":gear: {_who(notice)}a call of run {_run(notice)} ran."
    paragraphs = [text, _detail(notice)]
    if lines := evidence_lines(notice.evidence, most):
        paragraphs += _chunks("*What ran:*", lines)
    return f"Run {_plain_run(notice)}: a call ran", paragraphs


def _call_unknown(notice: RunNotice, most: int) -> _Rendered:
    """An external call's lease ran out with no result: it may or may not have run."""
    text = (f":warning: {_who(notice)}a call of run {_run(notice)} stopped reporting: "
            "whether it ran is unknown.")
    todo = ("Its agent must reconcile it (check whether it took effect) and report what it "
            "found; signoff never runs it again. See `signoff runs show {run}`.")
    return f"Run {_plain_run(notice)}: a call's outcome is unknown", [
        text, _detail(notice), _todo(todo, notice)]


_RENDERERS: dict[NoticeEvent, Callable[[RunNotice, int], _Rendered]] = {
    "answered": _answered,
    "failed": _failed,
    "halted": _halted,
    "expired": _expired,
    "continued": _continued,
    "cancelled": _cancelled,
    "call_ran": _call_ran,
    "call_unknown": _call_unknown,
}


def grant_item(key: str, value: Any) -> str:
    """`step limit: 16`, `spend limit: x1.5`: a grant's known keys in words, others as given."""
    known = _GRANT_WORDS.get(key)
    if known is None or isinstance(value, bool) or not isinstance(value, int | float):
        return f"{_key(key)}: {_value(value)}"
    label, show = known
    return f"{label}: {show(value)}"


_GRANT_WORDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "max_steps": ("step limit", str),
    "max_spend_usd": ("spend limit", mrkdwn.money),
    "max_tool_calls": ("tool-call limit", str),
    "max_elapsed_ms": ("time limit", lambda ms: mrkdwn.duration(int(ms))),
    "extra_steps": ("steps", lambda n: f"+{n}"),
    "extra_tool_calls": ("tool calls", lambda n: f"+{n}"),
    "spend_factor": ("spend limit", lambda f: f"x{f}"),
    "elapsed_factor": ("time limit", lambda f: f"x{f}"),
}


def _who(notice: RunNotice) -> str:
    return f"{mrkdwn.mention(notice.requester)} "


def _run(notice: RunNotice) -> str:
    return mrkdwn.code(notice.run_id)


def _plain_run(notice: RunNotice) -> str:
    """The run id for the fallback text: escaped, not code-formatted."""
    return mrkdwn.escape(notice.run_id)


def _plain_reason(notice: RunNotice, default: str) -> str:
    return mrkdwn.escape(notice.reason or default)


def _code_suffix(notice: RunNotice) -> str:
    return f" — {mrkdwn.code(notice.reason)}" if notice.reason else ""


def _detail(notice: RunNotice) -> str:
    return mrkdwn.clip(mrkdwn.escape(notice.detail or "").strip(), DETAIL_MAX)


def _todo(todo: str, notice: RunNotice) -> str:
    return f"*What to do:* {todo.replace('{run}', mrkdwn.in_code(notice.run_id))}"


def _key(key: str) -> str:
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(key)), 60)


def _value(value: Any) -> str:
    """A result value as a person reads it: strings as they are, the rest as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(text)), EVIDENCE_VALUE_MAX)


def _chunks(title: str, lines: list[str]) -> list[str]:
    """`title` and `lines` as paragraphs that each fit in one section."""
    paragraphs = [title]
    for line in lines:
        joined = f"{paragraphs[-1]}\n{line}"
        if mrkdwn.slack_len(joined) <= message.SECTION_TEXT_MAX:
            paragraphs[-1] = joined
        else:
            paragraphs.append(line)
    return paragraphs
