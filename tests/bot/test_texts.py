"""What people read: data never looks like signoff's own words, and no internals leak.

Every card, notice and reply kind is rendered with ordinary and with hostile
data (text a tool, a model or an API client could return) and read the way
Slack would show it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot import cards
from bot.cards import decline_form, message, replies
from resume import outcomes
from resume.outbox import (
    ApprovalCard,
    BudgetData,
    CardStatus,
    CardUpdate,
    DeclineData,
    EvidenceItem,
    NoticeEvent,
    PreviewData,
    RunNotice,
)
from store.reasons import RefusalReason
from store.records import Run
from store.states import RunState

AT = 1_796_000_000.0
#: The issue's example: a field value that drew a fake "Pre-approved" line and a fake amount.
SPOOF = "acct\n\n:white_check_mark: *Pre-approved by Finance*\n*Amount*: $1.00 https://evil.example"
#: Markup, mentions, bidi and zero-width controls, quotes, emoji: but no braces, so a
#: `{` in what is shown can only come from signoff itself.
HOSTILE = [
    SPOOF,
    "> :white_check_mark: Approved by <@U0BOSS> today",
    "\u202eknil\u202c \u2066x\u2069 z\u200bero\u200dwidth \u200e\u200f\u061c",
    "*bold* _it_ ~del~ `code` ```block``` <!channel> <@U0EVIL> <https://x|y> &amp;",
    "✅ Approved by U0BOSS\n❌ Declined",
]
ORDINARY = ["ACME Ltd", "Three line items, net 30."]
BIDI_AND_ZERO_WIDTH = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u061c\u2060\ufeff]")
#: Lines signoff draws itself: a status emoji or check mark, a bold label, "Approved by".
OWN_LINE = re.compile(r"^\s*(:[a-z0-9_+-]+:|[✅❌⌛⏳]|\*[^*\s][^*]*\*|Approved by|Declined by)")
EMOJI_CODE = re.compile(r":[a-z0-9_+-]+:")
ISO_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")
SLACK_DATE = re.compile(r"<!date\^\d+\^[^|>]*\|[^>]*>")
MENTION = re.compile(r"<@[UWB][A-Z0-9]+>")
#: The user ids signoff itself is given (hostile data may spell ids of its own, as data).
RAW_USER_ID = re.compile(r"\b(U0REP|U0LEAD|U0OTHER)\b")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def shown(msg: cards.Message | str) -> str:
    """Everything a person reads: the fallback and every text object, one text."""
    if isinstance(msg, str):
        return msg
    fallback, blocks = msg
    return "\n".join([fallback, *message.texts(blocks)])


def mrkdwn_objects(blocks: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(blocks)
    return found


def budget() -> BudgetData:
    return BudgetData(steps=3, spend_usd=0.12, tool_calls=2, elapsed_ms=65_000, max_steps=10,
                      max_spend_usd=1.0, max_tool_calls=20, max_elapsed_ms=600_000)


def card_with(value: str) -> ApprovalCard:
    return ApprovalCard(
        run_id="R-1", token="tok-abc", requester="U0REP", question=value, tool="send_quote",
        preview=PreviewData(title=value, fields=[("Customer", value), ("Amount", "$2,250.00"),
                                                 (value, "x")], body=value),
        budget=budget(), expires_at=AT, approvers=["U0REP", "U0LEAD"],
    )


def notices_with(value: str) -> list[RunNotice]:
    """One notice per kind (and the decline and after-a-write variants), carrying `value`."""
    evidence = [
        EvidenceItem(tool="lookup_account", status="succeeded",
                     fields={"account": value, "tier": 2, "flags": {"hold": False}}),
        EvidenceItem(tool="send_quote", status="succeeded", confirmed=True,
                     fields={"quote_id": "Q-7", "total": 2250.0, "note": value}),
    ]
    grant = {"by": "U0REP", "previous_reason": "budget:steps",
             "old_limits": {"max_steps": 8, "max_spend_usd": 1.0},
             "new_limits": {"max_steps": 12, "max_spend_usd": 1.5},
             "consumed": {"steps": 8, "spend_usd": 0.4}}
    base = {"run_id": "R-1", "requester": "U0REP", "detail": value}
    out = [RunNotice(event=event, reason=reason, answer=value, evidence=evidence, grant=grant,
                     tool="send_quote", **base)
           for event, reason in [("answered", None), ("failed", "recovery_exhausted"),
                                 ("halted", "budget:steps"), ("expired", "suspension_expired"),
                                 ("continued", "budget:steps"), ("cancelled", "cancelled")]]
    out.append(RunNotice(event="failed", reason="incomplete", missing=["send_quote"],
                         declined=DeclineData(by="U0LEAD", reason=value, tool="send_quote"),
                         **base))
    out.append(RunNotice(event="halted", reason="no_longer_permitted", **base))
    out.append(RunNotice(event="failed", reason="disk_on_fire", **base))
    out += [RunNotice(event=event, evidence=evidence, tool="refund_order", **base)
            for event in ("call_ran", "call_unknown")]  # an external agent's call
    assert {n.event for n in out} == set(get_args(NoticeEvent))
    return out


def run_with(value: str, state: RunState, reason: str | None = None) -> Run:
    now = datetime.fromtimestamp(AT, tz=UTC)
    return Run(
        id="run_abc", user_id="U0REP", question=value, route=None, state=state, step=3,
        spend_usd=0.12, tool_calls=2, elapsed_ms=1000, limits={}, scope_snapshot=None,
        scope_resolved_at=None, pending={"tool": "send_quote"}, pending_token=None,
        pending_preview=None, pending_preview_digest=None, expires_at=now, halt_reason=reason,
        answer=value, recovery_attempts=0, owner_id=None, lease_epoch=1, heartbeat_at=None,
        snapshot_version=1, app_fingerprint="f", slack_channel=None, slack_ts=None,
        message_seq=0, event_seq=0, started_at=now, updated_at=now,
    )


def replies_with(value: str) -> list[str]:
    """Every reply kind `/signoff` and a click can get, carrying `value` where data goes."""
    at = datetime.fromtimestamp(AT, tz=UTC)
    runs = [run_with(value, RunState.suspended), run_with(value, RunState.halted, "budget:steps"),
            run_with(value, RunState.answered), run_with(value, RunState.running),
            run_with(value, RunState.failed, "cancelled"),
            run_with(value, RunState.failed, "incomplete")]
    refusals: list[outcomes.Refusal] = [
        outcomes.AlreadyResumed("approve", "U0LEAD", at),
        outcomes.AlreadyResumed("decline", "U0LEAD", at),
        outcomes.NotAnApprover("U0OTHER", "U0REP", ["U0LEAD"]),
        outcomes.NotAnApprover("U0OTHER", "U0REP", None, policy=value),
        outcomes.NotAnApprover("U0OTHER", "U0REP", None),
        *(outcomes.UnknownOrExpired(RefusalReason(r))
          for r in ("unknown", "expired", "superseded", "closed")),
    ]
    return [
        replies.help_reply(), replies.unknown_subcommand(value), replies.missing_run_id("status"),
        replies.missing_question(), replies.question_too_long(5000, 4000), replies.unavailable(),
        replies.asked(runs[0]), replies.run_not_found(value),
        replies.continued(runs[1], {"max_steps": 8, "max_spend_usd": 1.0},
                          {"max_steps": 12, "max_spend_usd": 1.5}),
        replies.not_halted(value, "failed"), replies.cancelled(runs[4]),
        replies.not_cancellable(value, "answered"),
        *(replies.status(run) for run in runs),
        replies.status(runs[5], DeclineData(by="U0LEAD", reason=value)),
        replies.runs_list(runs), replies.runs_list([]),
        *(replies.refusal(refused) for refused in refusals),
        replies.decline_form_failed(),
    ]


def everything_with(value: str) -> list[cards.Message | str]:
    card = card_with(value)
    updates = [CardUpdate(run_id="R-1", token="tok-abc", status=status, actor="U0LEAD", at=AT,
                          reason=value) for status in get_args(CardStatus)]
    return [cards.approval_card(card), *(cards.resolved_card(card, u) for u in updates),
            *(cards.run_notice(n) for n in notices_with(value)), *replies_with(value)]


# --- 13.3: a preview is data ---------------------------------------------------------


def test_the_issue_example_value_draws_no_fake_line() -> None:
    msg = cards.approval_card(card_with(SPOOF))

    lines = [line for text in message.texts(msg[1]) for line in text.splitlines()]
    spoofed = [line for line in lines if "Pre-approved" in line]
    assert spoofed and all(line.startswith(("*Customer*: acct", "*acct", ">"))
                           for line in spoofed)  # inside a field, the title or the quote only
    assert [line for line in lines if line.startswith("*Amount*")] == ["*Amount*: $2,250.00"]
    assert not any(":white_check_mark:" in line for line in lines)
    customer = next(f["text"] for b in msg[1] for f in b.get("fields", [])
                    if f["text"].startswith("*Customer*"))
    assert "\n" not in customer and customer.count("*") == 2  # one bold label, one line
    assert "https://evil.example" not in shown(msg)  # no link Slack could guess at


def test_every_mrkdwn_object_is_verbatim_and_free_of_bidi_controls() -> None:
    for msg in everything_with(HOSTILE[2]):
        if isinstance(msg, str):
            assert not BIDI_AND_ZERO_WIDTH.search(msg)
            continue
        objects = mrkdwn_objects(msg[1])
        assert objects and all(o.get("verbatim") is True for o in objects)
        assert not BIDI_AND_ZERO_WIDTH.search(shown(msg))


def _signature(msg: cards.Message | str) -> tuple[int, int, int]:
    """What signoff's own markup amounts to: its own-looking lines, bold marks, emoji codes."""
    text = CODE_SPAN.sub("`code`", shown(msg))  # nothing formats inside inline code
    own = sum(1 for line in text.splitlines() if OWN_LINE.match(line))
    return own, text.count("*"), len(EMOJI_CODE.findall(text))


_hostile_text = st.lists(
    st.sampled_from(["\n", "\n\n", "*", "_", "~", "`", ":", ":white_check_mark:", "> ", ">",
                     "Approved by ", "*Amount*: ", "✅", "<@U0BOSS>", "<!here>", "&", "&gt;",
                     "\u202e", "\u200b", "https://evil.example", " ", "Finance", "$1.00"])
    | st.text(max_size=8),
    max_size=25,
).map(lambda parts: "v" + "".join(parts) + "v")  # never blank: blank values read "—"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_hostile_text)
def test_no_value_can_draw_a_line_signoff_draws(value: str) -> None:
    for hostile, ordinary in zip(everything_with(value), everything_with("x"), strict=True):
        assert _signature(hostile) == _signature(ordinary), shown(hostile)


# --- 14.2: no raw internals -------------------------------------------------------------


@pytest.mark.parametrize("value", ORDINARY + HOSTILE, ids=lambda v: repr(v[:16]))
def test_no_text_shows_a_dict_an_iso_stamp_or_a_raw_user_id(value: str) -> None:
    for msg in everything_with(value):
        text = SLACK_DATE.sub("<date>", shown(msg))
        assert "{" not in text, text
        assert not ISO_STAMP.search(text), text
        assert not RAW_USER_ID.search(MENTION.sub("<mention>", text)), text
        assert "signoff runs show" not in text, text
        assert " at today" not in text and "at <date>" not in text, text


def test_the_continue_grant_reads_as_words() -> None:
    [_, _, _, _, continued, *_] = notices_with("x")
    text = shown(cards.run_notice(continued))

    assert "*New limits:* 8 → 12 steps, $1.00 → $1.50 spend" in text
    assert "old_limits" not in text and "max_steps" not in text


def test_evidence_shows_money_like_the_preview() -> None:
    text = shown(cards.run_notice(notices_with("x")[0]))

    assert "total: $2,250.00" in text and "2250.0" not in text


def test_a_cancelled_run_says_by_whom_everywhere() -> None:
    cancelled = notices_with("x")[5]
    card = cards.resolved_card(card_with("x"), CardUpdate(
        run_id="R-1", token="tok-abc", status="cancelled", actor="U0REP", at=AT))

    assert "Run `R-1` was cancelled by <@U0REP>." in shown(cards.run_notice(cancelled))
    assert "Cancelled by <@U0REP>" in shown(card)
    status = replies.status(run_with("x", RunState.failed, "cancelled"))
    assert "Run `run_abc` was cancelled by <@U0REP>." in status
    assert "is failed" not in status


def test_expired_notice_gives_its_advice_once() -> None:
    text = shown(cards.run_notice(notices_with("x")[3]))

    assert text.count("/signoff continue") == 1
    assert "Nobody approved or declined `send_quote`" in text


# --- 14.1: a decline is a decline -------------------------------------------------------


def test_a_declined_run_is_told_as_declined_not_failed() -> None:
    notice = RunNotice(run_id="R-1", requester="U0REP", event="failed", reason="incomplete",
                       missing=["send_quote"], detail="the run ended without send_quote",
                       declined=DeclineData(by="U0LEAD", reason="wrong discount tier"))

    text = shown(cards.run_notice(notice))

    assert "Declined by <@U0LEAD>: wrong discount tier. Nothing was sent." in text
    assert "failed" not in text.lower() and "What to do" not in text


def test_a_declined_run_after_a_write_does_not_say_nothing_was_sent() -> None:
    notice = notices_with("x")[6].model_copy(update={"evidence": notices_with("x")[0].evidence})

    text = shown(cards.run_notice(notice))

    assert "Nothing was sent" not in text
    assert "`send_quote` had already run before that." in text


def test_status_of_a_declined_run_says_declined() -> None:
    run = run_with("x", RunState.failed, "incomplete")

    text = replies.status(run, DeclineData(by="U0LEAD", reason="wrong tier"))

    assert "Run `run_abc` was declined by <@U0LEAD>: wrong tier." in text
    assert "failed" not in text


# --- 14.3: the decline form -------------------------------------------------------------


def test_the_decline_form_label_leaves_optional_to_slack() -> None:
    view = decline_form.reason_view("tok")

    [block] = view["blocks"]
    assert block["label"]["text"] == "Reason" and block["optional"] is True
