"""Block Kit rendering: every card Slack accepts, whatever the preview holds."""

from __future__ import annotations

import json
import re
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from bot import cards, ids
from bot.cards import message, mrkdwn, reasons
from resume.outbox import (
    ApprovalCard,
    BudgetData,
    CardStatus,
    CardUpdate,
    EvidenceItem,
    FieldChange,
    NoticeEvent,
    PreviewData,
    RunNotice,
)

EXPIRES = 1_714_573_800.0  # 2024-05-01 14:30 UTC


def budget() -> BudgetData:
    return BudgetData(
        steps=3,
        spend_usd=0.12,
        tool_calls=2,
        elapsed_ms=65_000,
        max_steps=10,
        max_spend_usd=1.0,
        max_tool_calls=20,
        max_elapsed_ms=600_000,
    )


def card_factory(**overrides: Any) -> ApprovalCard:
    values: dict[str, Any] = {
        "run_id": "R-1",
        "token": "tok-abc",
        "requester": "U123",
        "question": "Send ACME the quote",
        "tool": "send_quote",
        "preview": PreviewData(
            title="Quote Q-7 for ACME",
            fields=[("Customer", "ACME Ltd"), ("Discount", "15%")],
            body="Three line items, net 30.",
        ),
        "budget": budget(),
        "expires_at": EXPIRES,
    }
    return ApprovalCard(**(values | overrides))


def update_factory(status: CardStatus, **overrides: Any) -> CardUpdate:
    values: dict[str, Any] = {
        "run_id": "R-1",
        "token": "tok-abc",
        "status": status,
        "actor": "U999",
        "at": EXPIRES + 60,
    }
    return CardUpdate(**(values | overrides))


def notice_factory(event: NoticeEvent, **overrides: Any) -> RunNotice:
    values: dict[str, Any] = {"run_id": "R-1", "requester": "U123", "event": event}
    return RunNotice(**(values | overrides))


def twenty_kb_preview() -> PreviewData:
    fields = [(f"Line item {i}", f"Widget {i} <@U0HACK> & co " + "x" * 120) for i in range(150)]
    fields.insert(3, ("Notes", "n" * 3_000))
    return PreviewData(title="Cart C-9 " + "t" * 400, fields=fields, body="Terms. " * 1_500)


def assert_valid(msg: cards.Message) -> list[str]:
    """Slack would accept `msg`: slack_sdk re-validates it, every limit holds. Returns its texts."""
    fallback, blocks = msg
    assert fallback.strip()
    assert mrkdwn.slack_len(fallback) <= message.FALLBACK_MAX
    assert 0 < len(blocks) <= message.MAX_BLOCKS
    json.dumps([fallback, blocks], ensure_ascii=False).encode("utf-8")  # sendable as UTF-8 JSON
    block_ids = [block["block_id"] for block in blocks if "block_id" in block]
    assert len(block_ids) == len(set(block_ids))
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        assert parsed.to_dict() == block  # slack_sdk's own validators, run on the dict
        if block["type"] == "header":
            assert mrkdwn.slack_len(block["text"]["text"]) <= message.HEADER_MAX
        if block["type"] == "section":
            if "text" in block:
                assert 0 < mrkdwn.slack_len(block["text"]["text"]) <= message.SECTION_TEXT_MAX
            assert len(block.get("fields", [])) <= message.FIELDS_PER_SECTION
            for field in block.get("fields", []):
                assert 0 < mrkdwn.slack_len(field["text"]) <= message.FIELD_MAX
        if block["type"] == "context":
            for element in block["elements"]:
                assert 0 < mrkdwn.slack_len(element["text"]) <= message.SECTION_TEXT_MAX
    texts = message.texts(blocks)
    assert sum(mrkdwn.slack_len(text) for text in texts) <= message.TEXT_BUDGET
    return texts


def joined(msg: cards.Message) -> str:
    return "\n".join(message.texts(msg[1]))


def actions_blocks(msg: cards.Message) -> list[dict[str, Any]]:
    return [block for block in msg[1] if block["type"] == "actions"]


def control_sequences(msg: cards.Message) -> list[str]:
    """Every `<...>` Slack would act on: in the fallback and in each mrkdwn text."""
    fallback, blocks = msg
    return [
        seq
        for text in [fallback, *message.texts(blocks, kinds=("mrkdwn",))]
        for seq in re.findall(r"<[^>]*>", text)
    ]


# --- approval_card -------------------------------------------------------------


def test_approval_card__is_valid_and_shows_request_preview_budget_and_expiry() -> None:
    msg = cards.approval_card(card_factory())

    text = "\n".join(assert_valid(msg))
    assert msg[1][0]["text"]["text"] == "send_quote needs approval"
    assert "<@U123> asked:" in text
    assert "Send ACME the quote" in text
    assert "`send_quote`" in text
    assert "*Quote Q-7 for ACME*" in text
    assert "*Customer*: ACME Ltd" in text
    assert "Three line items, net 30." in text
    assert "steps 3/10 · spend $0.12/$1.00 · tool calls 2/20 · time 1m 05s/10m 00s" in text
    assert "Preview truncated" not in text


def test_approval_card__expiry_is_a_slack_date_each_reader_sees_locally() -> None:
    text = joined(cards.approval_card(card_factory()))

    assert (
        "<!date^1714573800^expires {date_short_pretty} at {time}|expires 2024-05-01 at 14:30 UTC>"
        in text
    )


def test_approval_card__buttons_carry_the_token_and_the_contract_action_ids() -> None:
    (actions,) = actions_blocks(cards.approval_card(card_factory(token="tok-xyz")))

    approve, decline = actions["elements"]
    assert actions["block_id"] == ids.ACTIONS_BLOCK
    assert (approve["action_id"], approve["value"], approve["style"]) == (
        "signoff.approve",
        "tok-xyz",
        "primary",
    )
    assert (decline["action_id"], decline["value"], decline["style"]) == (
        "signoff.decline",
        "tok-xyz",
        "danger",
    )
    assert "confirm" not in approve


def test_approval_card__dangerous_tool_asks_for_confirmation_before_approving() -> None:
    (actions,) = actions_blocks(cards.approval_card(card_factory(dangerous=True)))

    approve, decline = actions["elements"]
    assert approve["confirm"]["title"]["text"] == "Approve send_quote?"
    assert "marked dangerous" in approve["confirm"]["text"]["text"]
    assert approve["confirm"]["confirm"]["text"] == "Approve"
    assert "confirm" not in decline


def test_approval_card__block_ids_carry_the_token() -> None:
    _, blocks = cards.approval_card(card_factory(token="tok-42"))

    assert all(
        block["block_id"].endswith(".tok-42") for block in blocks if block["type"] != "actions"
    )


def test_approval_card__escapes_a_channel_ping_in_the_question() -> None:
    msg = cards.approval_card(card_factory(question="hey <!channel> & <@U0BOSS> look"))

    text = joined(msg)
    assert "<!channel>" not in text and "<!channel>" not in msg[0]
    assert "hey &lt;!channel&gt; &amp; &lt;@U0BOSS&gt; look" in text
    assert "<@U0BOSS>" not in text


def test_approval_card__escapes_preview_title_fields_and_body() -> None:
    preview = PreviewData(
        title="<!here> title",
        fields=[("<!everyone>", "<https://evil.example|click>")],
        body="<!subteam^S1> body",
    )

    msg = cards.approval_card(card_factory(preview=preview))

    assert {seq for seq in control_sequences(msg) if not seq.startswith("<!date^")} == {"<@U123>"}


def test_approval_card__names_approvers_other_than_the_requester() -> None:
    with_others = joined(cards.approval_card(card_factory(approvers=["U200", "U300"])))
    requester_only = joined(cards.approval_card(card_factory(approvers=["U123"])))

    assert "Approvers: <@U200>, <@U300>" in with_others
    assert "Approvers" not in requester_only


def test_approval_card__lists_what_changed_while_waiting() -> None:
    diff = [
        FieldChange(field="Discount", old="10%", new="15%"),
        FieldChange(field="Rush fee", old=None, new="$40"),
    ]

    msg = cards.approval_card(card_factory(diff=diff, replaces_token="tok-old"))

    text = "\n".join(assert_valid(msg))
    assert "*Details changed while waiting*" in text
    assert "• *Discount*: 10% → 15%" in text
    assert "• *Rush fee*: _(none)_ → $40" in text
    assert "details changed" in msg[0]


def test_approval_card__a_long_diff_is_counted_not_dropped() -> None:
    diff = [FieldChange(field=f"f{i}", old="a" * 500, new="b" * 500) for i in range(40)]

    text = "\n".join(assert_valid(cards.approval_card(card_factory(diff=diff))))

    assert "… and 30 more changes" in text
    assert "signoff runs show" not in text  # CLI advice is for operators, not Slack


def test_approval_card__twenty_kb_preview_is_truncated_with_a_note() -> None:
    preview = twenty_kb_preview()
    assert len(preview.model_dump_json()) > 20_000

    msg = cards.approval_card(card_factory(preview=preview))

    text = "\n".join(assert_valid(msg))
    note = re.search(r"Preview truncated: (\d+) of 151 fields shown, (.*) — the run keeps", text)
    assert note is not None
    assert 0 < int(note.group(1)) < 151
    assert note.group(2) == "long values shortened, body shortened"
    assert "signoff runs show" not in text
    assert "<@U0HACK>" not in text
    assert len(actions_blocks(msg)) == 1


def test_approval_card__fields_go_ten_to_a_section_in_order() -> None:
    fields = [(f"k{i}", f"v{i}") for i in range(25)]

    _, blocks = cards.approval_card(card_factory(preview=PreviewData(title="T", fields=fields)))

    with_fields = [block["fields"] for block in blocks if "fields" in block]
    assert [len(chunk) for chunk in with_fields] == [10, 10, 5]
    assert with_fields[2][-1]["text"] == "*k24*: v24"


def test_approval_card__empty_preview_is_still_a_valid_card() -> None:
    preview = PreviewData(title="  ", fields=[("", ""), ("a", "   ")], body=" \n ")

    text = "\n".join(assert_valid(cards.approval_card(card_factory(preview=preview, question=""))))

    assert "*Preview*" in text
    assert "*a*: —" in text


# --- resolved_card --------------------------------------------------------------

STATUS_LINES: dict[str, str] = {
    "approved": ":white_check_mark: Approved by <@U999> <!date^1714573860^",
    "declined": ":x: Declined by <@U999>: too &lt;b&gt;big&lt;/b&gt;",
    "expired": ":hourglass: Expired <!date^1714573860^",
    "superseded": "Details changed while waiting — see the new request in the thread",
    "cancelled": ":no_entry_sign: Cancelled by <@U999>",
    "guard_failed": ":no_entry: Blocked by a check: too &lt;b&gt;big&lt;/b&gt;",
    "no_longer_permitted": ":lock: Permissions changed — please ask again",
    "failed": ":warning: too &lt;b&gt;big&lt;/b&gt;",
}


@pytest.mark.parametrize("status", get_args(CardStatus))
def test_resolved_card__replaces_the_buttons_with_a_status_line(status: CardStatus) -> None:
    update = update_factory(status, reason="too <b>big</b>")

    msg = cards.resolved_card(card_factory(dangerous=True), update)

    text = "\n".join(assert_valid(msg))
    assert actions_blocks(msg) == []
    assert all(block.get("block_id") != ids.ACTIONS_BLOCK for block in msg[1])
    assert STATUS_LINES[status] in text
    assert "*Quote Q-7 for ACME*" in text


def test_resolved_card__expired_says_when_without_at_today_at() -> None:
    text = joined(cards.resolved_card(card_factory(), update_factory("expired", actor=None)))

    assert re.search(r"Expired <!date\^1714573860\^\{date_short_pretty\} at \{time\}\|[^>]*>: "
                     r"nobody decided in time", text)
    assert "Expired at" not in text


def test_resolved_card__declined_without_reason_names_who() -> None:
    msg = cards.resolved_card(card_factory(), update_factory("declined"))

    assert msg[1][1]["text"]["text"] == ":x: Declined by <@U999>"
    assert msg[1][0]["text"]["text"] == "send_quote — declined"


def test_resolved_card__gets_new_block_ids() -> None:
    card = card_factory()
    _, open_blocks = cards.approval_card(card)
    _, done_blocks = cards.resolved_card(card, update_factory("approved"))

    assert {b["block_id"] for b in open_blocks}.isdisjoint({b["block_id"] for b in done_blocks})


def test_resolved_card__twenty_kb_preview_stays_within_limits() -> None:
    card = card_factory(
        preview=twenty_kb_preview(),
        diff=[FieldChange(field="f" * 300, old="o" * 900, new="n" * 900)] * 30,
        approvers=[f"U{i:04d}" for i in range(300)],
        question="q" * 10_000,
    )

    text = "\n".join(
        assert_valid(cards.resolved_card(card, update_factory("failed", reason="r" * 9_000)))
    )

    assert "Preview truncated" in text
    assert "and 290 others" in text


# --- run_notice ------------------------------------------------------------------


def test_run_notice__answered_shows_the_answer_and_the_evidence_in_order() -> None:
    notice = notice_factory(
        "answered",
        answer="Bought 3 widgets for <!channel>",
        evidence=[
            EvidenceItem(tool="build_cart", status="succeeded", fields={"cart_id": "C-9"}),
            EvidenceItem(tool="complete_checkout", status="succeeded", fields={"order_id": "O-1"}),
            EvidenceItem(tool="analyse", status="failed", fields={"rows": 3, "ok": False}),
        ],
    )

    msg = cards.run_notice(notice)

    text = "\n".join(assert_valid(msg))
    assert "Bought 3 widgets for &lt;!channel&gt;" in text
    assert (
        "1. `build_cart` — cart_id: C-9\n"
        "2. `complete_checkout` — order_id: O-1\n"
        "3. `analyse` (failed) — rows: 3, ok: no"
    ) in text
    assert msg[0] == "Run R-1 answered"


@pytest.mark.parametrize("reason", sorted(reasons.FAILURES))
def test_run_notice__failed_explains_each_known_reason(reason: str) -> None:
    msg = cards.run_notice(notice_factory("failed", reason=reason))

    text = "\n".join(assert_valid(msg))
    assert "Run `R-1` for <@U123> failed." in text
    assert reasons.FAILURES[reason].what in text
    assert "*What to do:*" in text
    assert "`R-1`" in text


def test_run_notice__incomplete_names_what_never_ran() -> None:
    notice = notice_factory("failed", reason="incomplete", missing=["complete_checkout"])

    text = joined(cards.run_notice(notice))

    assert "*Never ran:* `complete_checkout`" in text


def test_run_notice__incomplete_says_a_required_tool_that_ran_and_failed_did_not_succeed() -> None:
    notice = notice_factory(
        "failed", reason="incomplete", missing=["sign_cart", "complete_checkout"],
        evidence=[EvidenceItem(tool="sign_cart", status="failed", fields={"cart_id": "C-9"})])

    text = joined(cards.run_notice(notice))

    assert "*Never ran:* `complete_checkout`" in text
    assert "*Ran but did not succeed:* `sign_cart`" in text
    assert "Never ran:* `sign_cart`" not in text


@pytest.mark.parametrize("reason", ["incomplete", "cancelled", "disk_on_fire"])
def test_run_notice__an_api_runs_failure_never_advises_signoff_ask(reason: str) -> None:
    hosted = joined(cards.run_notice(notice_factory("failed", reason=reason)))
    api = joined(cards.run_notice(notice_factory("failed", reason=reason, external=True)))

    assert "Ask again with `/signoff ask`" in hosted
    assert "Ask again" not in api and "route or app" not in api
    assert reasons.AGENT_DECIDES in api


def test_run_notice__unknown_failure_reason_still_reads_as_a_sentence() -> None:
    text = joined(cards.run_notice(notice_factory("failed", reason="disk_on_fire")))

    assert "disk_on_fire" not in text  # a code is an internal; the sentence says it
    assert "The run failed." in text
    assert "signoff runs show" not in text


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("budget:steps", "The run used all of its steps."),
        ("budget:spend_usd", "The run used all of its spend limit."),
        ("budget:widgets", "The run used all of its widgets budget."),
        ("no_longer_permitted", "Your permissions changed"),
        ("suspension_expired", "Nobody answered the approval request in time."),
    ],
)
def test_run_notice__halted_names_the_bound_and_how_to_continue(reason: str, says: str) -> None:
    text = "\n".join(assert_valid(cards.run_notice(notice_factory("halted", reason=reason))))

    assert "Run `R-1` for <@U123> paused." in text
    assert says in text
    assert (
        "Continue with `/signoff continue R-1`" in text
        or "continue with `/signoff continue R-1`" in text
    )


def test_run_notice__continued_shows_the_grant_in_words() -> None:
    old = {"max_steps": 8, "max_spend_usd": 1.0, "max_tool_calls": 20, "max_elapsed_ms": 600_000}
    new = {"max_steps": 12, "max_spend_usd": 1.5, "max_tool_calls": 20, "max_elapsed_ms": 900_000}
    grant = {"by": "U123", "previous_reason": "budget:steps", "old_limits": old,
             "new_limits": new, "consumed": {"steps": 8}, "note": "<!here>"}

    text = joined(cards.run_notice(notice_factory("continued", grant=grant)))

    assert "*New limits:* 8 → 12 steps, $1.00 → $1.50 spend, 10m 00s → 15m 00s time" in text
    assert "{" not in text and "old_limits" not in text and "here" not in text


@pytest.mark.parametrize("event", get_args(NoticeEvent))
def test_run_notice__every_event_is_valid_and_names_the_run(event: NoticeEvent) -> None:
    notice = notice_factory(event, reason="x", detail="Something <!here> happened.", answer="A")

    text = "\n".join(assert_valid(cards.run_notice(notice)))

    assert "<@U123>" in text
    assert "Run `R-1`" in text
    assert "signoff runs show" not in text
    assert "Something &lt;!here&gt; happened." in text


def test_run_notice__huge_answer_and_evidence_stay_within_limits() -> None:
    evidence = [
        EvidenceItem(tool=f"tool_{i}", status="succeeded", fields={"blob": "z" * 5_000, "n": i})
        for i in range(200)
    ]
    notice = notice_factory("answered", answer="a" * 50_000, evidence=evidence, detail="d" * 9_000)

    text = "\n".join(assert_valid(cards.run_notice(notice)))

    assert "… and 175 more" in text


# --- help_text -------------------------------------------------------------------


def test_help_text__lists_every_subcommand_with_its_argument() -> None:
    text = cards.help_text()

    for usage in [
        "/signoff ask &lt;question&gt;",
        "/signoff continue &lt;run-id&gt;",
        "/signoff status &lt;run-id&gt;",
        "/signoff list",
        "/signoff cancel &lt;run-id&gt;",
        "/signoff help",
    ]:
        assert f"`{usage}`" in text
    assert "<" not in text


# --- mrkdwn primitives -----------------------------------------------------------


def test_clip__never_cuts_inside_a_mention_or_an_entity() -> None:
    assert mrkdwn.clip("hello <@U123456> there", 12) == "hello…"
    assert mrkdwn.clip("fish &amp; chips", 8) == "fish…"
    assert mrkdwn.clip("short", 5) == "short"


def test_clip__counts_emoji_as_two_units() -> None:
    clipped = mrkdwn.clip("😀" * 100, 11)

    assert clipped == "😀" * 5 + "…"
    assert mrkdwn.slack_len(clipped) == 11


# --- properties ------------------------------------------------------------------

_TRICKY = st.sampled_from(
    ["<!channel>", "<@U1>", "&amp;", "<", ">", "&", "*", "`", "_", "\n", "😀", "\u0301", "\ud800"]
)
_TEXT = st.one_of(
    st.text(st.characters(), max_size=40),
    st.lists(st.one_of(_TRICKY, st.text(max_size=8)), max_size=30).map("".join),
    st.builds(
        lambda s, n: s * n, st.text(st.characters(), min_size=1, max_size=6), st.integers(1, 6_000)
    ),
)
_FIELDS = st.one_of(
    st.lists(st.tuples(_TEXT, _TEXT), max_size=30),
    st.builds(lambda pair, n: [pair] * n, st.tuples(_TEXT, _TEXT), st.integers(0, 600)),
)
_PREVIEWS = st.builds(PreviewData, title=_TEXT, fields=_FIELDS, body=st.none() | _TEXT)
_PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_PROPERTY
@given(
    preview=_PREVIEWS,
    question=_TEXT,
    tool=_TEXT,
    dangerous=st.booleans(),
    diff=st.none()
    | st.lists(
        st.builds(FieldChange, field=_TEXT, old=st.none() | _TEXT, new=st.none() | _TEXT),
        max_size=15,
    ),
    expires_at=st.floats(allow_nan=True, allow_infinity=True),
)
def test_approval_card__any_preview_yields_a_valid_message(
    preview: PreviewData,
    question: str,
    tool: str,
    dangerous: bool,
    diff: list[FieldChange] | None,
    expires_at: float,
) -> None:
    card = card_factory(
        preview=preview,
        question=question,
        tool=tool,
        dangerous=dangerous,
        diff=diff,
        expires_at=expires_at,
    )

    for msg in [
        cards.approval_card(card),
        cards.resolved_card(card, update_factory("declined", reason=question)),
    ]:
        assert_valid(msg)
        allowed = ("<@U123>", "<@U999>", "<!date^")
        assert all(seq.startswith(allowed) for seq in control_sequences(msg))


@_PROPERTY
@given(
    event=st.sampled_from(get_args(NoticeEvent)),
    reason=st.none() | _TEXT,
    answer=st.none() | _TEXT,
    detail=st.none() | _TEXT,
    evidence=st.lists(
        st.builds(
            EvidenceItem,
            tool=_TEXT,
            status=_TEXT,
            fields=st.dictionaries(_TEXT, _TEXT | st.integers(), max_size=5),
        ),
        max_size=40,
    ),
    missing=st.lists(_TEXT, max_size=10),
    run_id=_TEXT.filter(lambda s: s.strip() != ""),
)
def test_run_notice__any_payload_yields_a_valid_message(
    event: NoticeEvent,
    reason: str | None,
    answer: str | None,
    detail: str | None,
    evidence: list[EvidenceItem],
    missing: list[str],
    run_id: str,
) -> None:
    notice = notice_factory(
        event,
        reason=reason,
        answer=answer,
        detail=detail,
        evidence=evidence,
        missing=missing,
        run_id=run_id,
        grant={"steps": 4},
    )

    msg = cards.run_notice(notice)

    assert_valid(msg)
    assert all(seq == "<@U123>" for seq in control_sequences(msg))


def test_help_text__shows_an_apps_examples_as_inert_text() -> None:
    text = cards.help_text(["refund order 7", "<!channel> *now* `x`\nsecond line"])
    assert "• `/signoff ask refund order 7`" in text
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "second line" in text and "\nsecond line" not in text
    assert "for example" not in cards.help_text()
