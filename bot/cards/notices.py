"""Messages about a run's outcome, posted in its card's thread (or to the requester).

One renderer per `NoticeEvent`. Each returns a plain summary (the fallback
text) and the paragraphs of the message; `run_notice` turns those into
sections and adds a footer naming the run. Every notice but an answer says
what did happen (the tools that ran), and none advises asking again once a
confirmed write, such as a sent quote, has run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeGuard

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
#: `detail` from resume, the list of tools that never ran, a grant, a decline reason.
DETAIL_MAX = 1000
#: Result keys whose numbers are amounts of money, shown like the preview shows them.
MONEY_KEYS = ("total", "amount", "price", "cost", "usd", "subtotal", "discount", "fee")

_Rendered = tuple[str, list[str]]


def run_notice(notice: RunNotice) -> message.Message:
    """The message telling the requester how their run ended (or paused, or continued).

    Past Slack's size budget, fewer evidence lines are shown (the rest counted):
    a notice that cannot be sent is nowhere.
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
    blocks.append(message.context(
        f"Run {_run(notice)}", block=message.block_id(notice.run_id, f"notice.{notice.event}.run")))
    return message.finish(summary, blocks)


def evidence_lines(items: list[EvidenceItem], most: int = EVIDENCE_MAX) -> list[str]:
    """`1. `complete_checkout` — order_id: O-1`: each tool that ran, in order, with key fields."""
    lines = []
    for number, item in enumerate(items[:most], start=1):
        line = f"{number}. {mrkdwn.code(item.tool)}"
        if item.status != "succeeded":
            line += f" ({mrkdwn.escape(mrkdwn.one_line(item.status))})"
        if item.fields:
            line += " — " + ", ".join(f"{_key(k)}: {_value(k, v)}" for k, v in item.fields.items())
        lines.append(mrkdwn.clip(line, EVIDENCE_LINE_MAX))
    if (rest := len(items) - most) > 0:
        lines.append(f"… and {rest} more")
    return lines


def written(notice: RunNotice) -> list[str]:
    """Confirmed tools that succeeded: done, and done again if the person asks again."""
    return list(dict.fromkeys(
        e.tool for e in notice.evidence if e.confirmed and e.status == "succeeded"))


def _answered(notice: RunNotice, most: int) -> _Rendered:
    answer = mrkdwn.clip(mrkdwn.quoted(notice.answer or ""), ANSWER_MAX)
    lead = f":white_check_mark: Run {_run(notice)} answered {_who(notice)}:"
    paragraphs = [f"{lead}\n{answer or '_(no answer text)_'}", _detail(notice)]
    if lines := evidence_lines(notice.evidence, most):
        paragraphs += _chunks("*Evidence* — the tools that ran, in order:", lines)
    return f"Run {_plain_run(notice)} answered", paragraphs


def _failed(notice: RunNotice, most: int) -> _Rendered:
    if notice.declined is not None:
        return _declined(notice, most)
    why = reasons.failure(notice.reason, external=notice.external)
    text = f":x: Run {_run(notice)} for {_who(notice)} failed. {why.what}"
    # A required tool that ran and failed is in the evidence: say so, never "never ran".
    tried = {item.tool for item in notice.evidence}
    for label, tools in (("Never ran", [t for t in notice.missing if t not in tried]),
                         ("Ran but did not succeed", [t for t in notice.missing if t in tried])):
        if tools:
            listed = ", ".join(mrkdwn.code(tool) for tool in tools)
            text += "\n" + mrkdwn.clip(f"*{label}:* {listed}", DETAIL_MAX)
    paragraphs = [text, _detail(notice), *_what_happened(notice, most), _todo(why, notice)]
    return f"Run {_plain_run(notice)} failed", paragraphs


def _declined(notice: RunNotice, most: int) -> _Rendered:
    """A person said no: told as exactly that, not as a failure."""
    declined = notice.declined
    assert declined is not None
    reason = mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(declined.reason or "")), DETAIL_MAX)
    said = f"Declined by {mrkdwn.mention(declined.by)}" + (f": {reason}" if reason else "")
    done = written(notice)
    after = (f"{_tools(done)} had already run before that." if done
             else "Nothing was sent.")
    paragraphs = [f":x: {said.rstrip('.')}. {after}"]
    if done:
        paragraphs += _what_happened(notice, most)
    return f"Run {_plain_run(notice)} declined. {after}", paragraphs


def _halted(notice: RunNotice, most: int) -> _Rendered:
    why = reasons.halt(notice.reason)
    text = f":double_vertical_bar: Run {_run(notice)} for {_who(notice)} paused. {why.what}"
    paragraphs = [text, _detail(notice), *_what_happened(notice, most), _todo(why, notice)]
    return f"Run {_plain_run(notice)} paused", paragraphs


def _expired(notice: RunNotice, most: int) -> _Rendered:
    what = mrkdwn.code(notice.tool) if notice.tool else "the approval request"
    text = (f":hourglass: Nobody approved or declined {what} for {_who(notice)} in time, "
            f"so the request expired and run {_run(notice)} is paused.")
    why = reasons.halt(notice.reason or "suspension_expired")
    paragraphs = [text, _detail(notice), *_what_happened(notice, most), _todo(why, notice)]
    return f"Run {_plain_run(notice)}: approval request expired", paragraphs


def _continued(notice: RunNotice, most: int) -> _Rendered:
    grant = notice.grant or {}
    by = grant.get("by")
    who = mrkdwn.mention(by) if isinstance(by, str) and by else _who(notice)
    text = f":arrow_forward: Run {_run(notice)} continues: {who} granted it more."
    if limits := grant_words(grant):
        text += "\n" + mrkdwn.clip(f"*New limits:* {limits}", DETAIL_MAX)
    return f"Run {_plain_run(notice)} continued", [text, _detail(notice)]


def _cancelled(notice: RunNotice, most: int) -> _Rendered:
    text = f":no_entry_sign: Run {_run(notice)} was cancelled by {_who(notice)}."
    return f"Run {_plain_run(notice)} was cancelled", [
        text, _detail(notice), *_what_happened(notice, most)]


def _call_ran(notice: RunNotice, most: int) -> _Rendered:
    """An external agent reported what its approved call did."""
    text = f":gear: An approved call of run {_run(notice)} (asked by {_who(notice)}) ran."
    paragraphs = [text, _detail(notice)]
    if lines := evidence_lines(notice.evidence, most):
        paragraphs += _chunks("*What ran:*", lines)
    return f"Run {_plain_run(notice)}: a call ran", paragraphs


def _call_unknown(notice: RunNotice, most: int) -> _Rendered:
    """An external call's lease ran out with no result: it may or may not have run."""
    text = (f":warning: An approved call of run {_run(notice)} (asked by {_who(notice)}) "
            "stopped reporting: whether it ran is unknown.")
    todo = ("*What to do:* nothing here. Its agent must check whether it took effect and "
            "report what it found; signoff never runs it again.")
    return f"Run {_plain_run(notice)}: a call's outcome is unknown", [
        text, _detail(notice), todo]


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

#: A limit's words and how its numbers read, in the order a grant lists them.
_LIMITS: dict[str, tuple[str, Callable[[float], str]]] = {
    "max_steps": ("steps", lambda n: f"{int(n):,}"),
    "max_spend_usd": ("spend", mrkdwn.money),
    "max_tool_calls": ("tool calls", lambda n: f"{int(n):,}"),
    "max_elapsed_ms": ("time", lambda ms: mrkdwn.duration(int(ms))),
}


def grant_words(grant: dict[str, Any]) -> str:
    """`8 → 12 steps, $1.00 → $1.50 spend`: each limit a continue raised, in words."""
    old, new = grant.get("old_limits") or {}, grant.get("new_limits") or {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    parts = []
    for key, (label, show) in _LIMITS.items():
        after = new.get(key)
        if not _is_number(after) or after == old.get(key):
            continue
        before = old.get(key)
        was = f"{show(before)} → " if _is_number(before) else ""
        parts.append(f"{was}{show(after)} {label}")
    return ", ".join(parts)


def _what_happened(notice: RunNotice, most: int) -> list[str]:
    """The tools that ran, and, if a confirmed one did, that it was done."""
    lines = evidence_lines(notice.evidence, most)
    if not lines:
        return ["*What did happen:* no tool ran, so nothing was done."]
    paragraphs = _chunks("*What did happen* — the tools that ran, in order:", lines)
    if done := written(notice):
        paragraphs.append(f"*Already done:* {_tools(done)} ran and succeeded, so that was done.")
    return paragraphs


def _tools(names: list[str]) -> str:
    return mrkdwn.clip(", ".join(mrkdwn.code(name) for name in names), DETAIL_MAX)


def _todo(why: reasons.Explanation, notice: RunNotice) -> str:
    if notice.external:
        why = reasons.for_agent(why)
    todo = (why.todo_after_write or reasons.AFTER_WRITE) if written(notice) else why.todo
    return f"*What to do:* {todo.replace('{run}', mrkdwn.in_code(notice.run_id))}"


def _who(notice: RunNotice) -> str:
    return mrkdwn.mention(notice.requester)


def _run(notice: RunNotice) -> str:
    return mrkdwn.code(notice.run_id)


def _plain_run(notice: RunNotice) -> str:
    """The run id for the fallback text: escaped, not code-formatted."""
    return mrkdwn.entities(notice.run_id)


def _detail(notice: RunNotice) -> str:
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(notice.detail or "")), DETAIL_MAX)


def _key(key: str) -> str:
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(key)), 60)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value(key: str, value: Any) -> str:
    """A result value as a person reads it: money like the preview, strings as they are."""
    if _is_number(value) and math.isfinite(value) and any(m in key.lower() for m in MONEY_KEYS):
        text = mrkdwn.money(float(value))
    elif _is_number(value) and math.isfinite(value):
        text = f"{value:,}"
    else:
        text = _words(value)
    return mrkdwn.clip(mrkdwn.escape(mrkdwn.one_line(text)), EVIDENCE_VALUE_MAX)


def _words(value: Any) -> str:
    """A structured value as words (`a 1, b 2`), never as a dict or a list literal."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_words(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_words(v) for v in value)
    if value is None or isinstance(value, bool):
        return {None: "none", True: "yes", False: "no"}[value]
    return str(value)


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
