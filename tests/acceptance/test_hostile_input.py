"""Hostile and broken Slack requests through the real HTTP server and the real Bolt app.

One suspended quotes run waits for its requester (``REP``). Hypothesis then
throws requests at ``POST /slack/events``: block_actions, view_submission and
slash commands, correctly signed but malformed (keys dropped, values replaced
by nested garbage of the wrong type), oversized (bodies past 1 MiB), carrying
unknown or real-but-not-yours tokens and run ids, wrong action and callback
ids, and unicode edge cases (lone surrogates escaped in JSON, RTL overrides,
zero-width characters, NUL). A share of them is sent unsigned, signed with
another secret, or replayed / post-dated past the 5-minute window.

Signed payloads of every other type Slack sends (``interactive_message``,
``workflow_step_edit``, shortcuts, events...) with their fields missing or
mangled, and handled ones nested from just past the limit to 6,000 levels, must get
exactly 400: the door answers what the bot does not handle. A share of the
signed requests is sent twice with the same bytes: a command's second copy is
refused (409) unless the first already was; a click's changes nothing.

Each request must get an answer below 500 (401 exactly when the signature is
bad), and afterwards every row of every table (runs, messages, events,
ledger, approvals, outbox, the CRM's quotes) must be what it was before; the
door's own record of signatures it has seen is the one table left out.

The server is built once per dialect inside the test and hypothesis drives it
through a dedicated event loop, so no function-scoped fixture is shared
between examples.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from bot import ids, intake
from bot.listeners import commands
from bot.sandbox import signing
from examples import crm as crm_tables
from resume import ask
from store import runs, schema
from store.records import Run
from store.states import RunState
from tests.bot.harness import ASK, REP, SECRET, BotWorld, bot_world

try:  # written alongside the multi-replica harness; count when it is there
    from tests.acceptance import ledger_summary
except ImportError:  # pragma: no cover - only before that module lands
    ledger_summary = None  # type: ignore[assignment]

EXAMPLES = 60
MIB = 1024 * 1024
HOSTILE = settings(max_examples=EXAMPLES, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Snapshot = dict[str, list[str]]


# --- the world, driven from sync hypothesis code ---------------------------------------


@dataclass
class Target:
    """The running server, its loop, one suspended run and the database as it stood."""

    loop: asyncio.Runner
    world: BotWorld
    run: Run
    token: str
    baseline: Snapshot
    tried: int = 0
    unhandled: int = 0
    deep: int = 0
    replays: int = 0

    def send(self, body: bytes, headers: dict[str, str]) -> int:
        return self.loop.run(self._send(body, headers))

    async def _send(self, body: bytes, headers: dict[str, str]) -> int:
        # A BytesIO, not bytes: aiohttp warns (an error here) about large raw bodies.
        async with self.world.http.post(self.world.url + ids.EVENTS_PATH,
                                        data=io.BytesIO(body), headers=headers) as response:
            await response.read()
            status = response.status
        await self.world.settle()
        return status

    def unchanged(self) -> None:
        after = self.loop.run(_snapshot(self.world))
        changed = [name for name in self.baseline if after[name] != self.baseline[name]]
        assert not changed, f"hostile request changed {changed}"


@contextmanager
def _target(url: str) -> Iterator[Target]:
    with asyncio.Runner() as loop:
        opened = bot_world(url)
        world = loop.run(opened.__aenter__())
        try:
            run = loop.run(_suspended(world))
            target = Target(loop, world, run, run.pending_token or "",
                            loop.run(_snapshot(world)))
            yield target
            if ledger_summary is not None:
                ledger_summary.count(ledger_summary.BAD_INPUTS, target.tried)
                ledger_summary.count(ledger_summary.UNHANDLED, target.unhandled)
                ledger_summary.count(ledger_summary.DEEP, target.deep)
                ledger_summary.count(ledger_summary.REPLAYS, target.replays)
        finally:
            loop.run(opened.__aexit__(None, None, None))


async def _suspended(world: BotWorld) -> Run:
    reply = await world.command(REP, f"ask {ASK}")
    assert reply.status == 200, reply.text
    [run] = await runs.list_runs(world.db, user_id=REP, limit=1)
    run = await runs.get(world.db, run.id)
    assert run.state is RunState.suspended and run.pending_token
    await world.deliver()
    return run


async def _snapshot(world: BotWorld) -> Snapshot:
    """Every row of signoff's tables and the CRM's, as sorted reprs (but the door's own)."""
    tables = [t for t in [*schema.metadata.sorted_tables, *crm_tables.metadata.sorted_tables]
              if t is not schema.seen_requests]
    found: Snapshot = {}
    async with world.db.read() as conn:
        for table in tables:
            rows = (await conn.execute(select(table))).all()
            found[table.name] = sorted(repr(tuple(row)) for row in rows)
    return found


# --- what gets sent ----------------------------------------------------------------------

EDGES = [
    "", " ", "\x00", "a\x00b", "\ud800", "\udfff", "x\udbff", "\u202eevorppa\u202c",
    "\u200b", "\u200d\u200c\ufeff\u2060", "\u05e9\u05dc\u05d5\u05dd", "\u0301" * 40,
    "\U0001f600\U0001f3f3\ufe0f\u200d\U0001f308", "%00", "\\u0000", "null", "[]", "{}",
    "'; DROP TABLE runs; --", "<!channel>", "<@U0REP>", "\r\n\t", "\uffff", "\U0010ffff",
]
#: Text with every code point class, lone surrogates (category Cs) included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=24)
NASTY = st.sampled_from(EDGES) | ANY_TEXT
#: Padding for one field: mostly none, else from a few KiB to past aiohttp's 1 MiB limit.
PADDING = st.none() | st.none() | st.builds(
    lambda chunk, n: chunk * n, st.sampled_from(["x", "\u00e9", "\ud800", "\x00", "\u202e\u200b"]),
    st.integers(min_value=2_000, max_value=400_000))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), NASTY)
GARBAGE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=6,
)
STRANGERS = st.sampled_from(["U0OTHER", "U0STRANGER", "W0ENTERPRISE", "", "U0REP "]) | NASTY
WRONG_ACTIONS = ["signoff.approve ", "SIGNOFF.APPROVE", "signoff.approve\u200b",
                 "signoff.decline\x00", "signoff.Approve", "signoff.approve.", ""]
WRONG_CALLBACKS = ["signoff.decline_reason ", "signoff.DECLINE_REASON", "signoff.decline",
                   "signoff.decline_reason\u200b", ""]
#: Percent chances of dropping a key or swapping a value for garbage, per node.
RATES = st.sampled_from([0, 0, 1, 3, 8, 20])
#: How a request is signed; "good" most of the time.
SIGNINGS = st.sampled_from(["good"] * 6 + ["none", "other_secret", "replayed", "post_dated",
                                            "other_body"])


def _ids(target: Target) -> st.SearchStrategy[str]:
    """Tokens and run ids: the real ones (which strangers may not use) and made-up ones."""
    real = [target.token, target.run.id, target.token.upper(), target.token + "\u200b",
            target.token[:-1], f" {target.token}", ask.new_run_id(), "tok_unknown"]
    return st.sampled_from(real) | NASTY


@st.composite
def _padded(draw: st.DrawFn, payload: Any) -> Any:
    """``payload`` with one field (an existing one or a new one) replaced by a long string."""
    pad = draw(PADDING)
    if pad is None or not isinstance(payload, dict):
        return payload
    key = draw(st.sampled_from(sorted(payload) or ["padding"]) | st.just("padding"))
    return payload | {key: pad}


@st.composite
def _mutated(draw: st.DrawFn, value: Any, rate: int) -> Any:
    """``value`` with keys dropped, values swapped for garbage and garbage keys added."""
    if draw(st.integers(0, 99)) < rate // 2:
        return draw(GARBAGE)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if draw(st.integers(0, 99)) < rate:
                continue
            out[key] = draw(_mutated(inner, rate))
        if draw(st.integers(0, 99)) < rate:
            out[draw(ANY_TEXT)] = draw(GARBAGE)
        return out
    if isinstance(value, list):
        return [draw(_mutated(inner, rate)) for inner in value]
    return value


def _response_url(target: Target, user: str) -> st.SearchStrategy[str]:
    # Only the stand-in's URLs or text that is no URL at all: never a real host.
    return st.one_of(st.just(target.world.fake.response_url("C0APPROVALS", user=user)),
                     st.sampled_from(["", "not a url", "/relative", "\x00"]))


@st.composite
def block_actions(draw: st.DrawFn, target: Target) -> Any:
    user = draw(STRANGERS)
    right = st.sampled_from([ids.APPROVE_ACTION, ids.APPROVE_ACTION, ids.DECLINE_ACTION])
    action = draw(st.one_of(right, right, right, st.sampled_from(WRONG_ACTIONS), NASTY))
    payload = signing.block_actions_payload(
        user, action, draw(_ids(target)), draw(st.sampled_from(["C0APPROVALS"]) | NASTY),
        draw(st.sampled_from(["1700000000.000100"]) | NASTY), draw(_response_url(target, user)),
        draw(st.sampled_from([signing.new_trigger_id()]) | NASTY),
        block_id=draw(st.sampled_from([ids.ACTIONS_BLOCK]) | NASTY),
        is_ephemeral=draw(st.booleans()),
    )
    return draw(_padded(draw(_mutated(payload, draw(RATES)))))


@st.composite
def view_submissions(draw: st.DrawFn, target: Target) -> Any:
    right = st.just(ids.DECLINE_REASON_CALLBACK)
    callback = draw(st.one_of(right, right, right, st.sampled_from(WRONG_CALLBACKS), NASTY))
    values = {ids.DECLINE_REASON_BLOCK: {ids.DECLINE_REASON_ACTION: {
        "type": "plain_text_input", "value": draw(st.none() | NASTY)}}}
    payload = signing.view_submission_payload(draw(STRANGERS), callback, draw(_ids(target)),
                                              values)
    return draw(_padded(draw(_mutated(payload, draw(RATES)))))


@st.composite
def slash_commands(draw: st.DrawFn, target: Target) -> dict[str, str]:
    """Form fields of a `/signoff` that, whatever it says, must not start or touch a run."""
    user = draw(STRANGERS)
    word = draw(st.sampled_from([*ids.SUBCOMMANDS, "ASK", "Cancel", "approve", ""]) | NASTY)
    rest = draw(_ids(target) | NASTY)
    text = draw(st.sampled_from([f"{word} {rest}", f"{word}  `{rest}` please", rest])
                | NASTY)
    fields = {
        "token": "sandbox-verification-token", "team_id": signing.TEAM_ID,
        "team_domain": signing.TEAM_DOMAIN, "channel_id": "C0GENERAL",
        "channel_name": "general", "user_id": user, "user_name": "someone",
        "command": draw(st.one_of(st.just(ids.COMMAND), st.just(ids.COMMAND),
                                  st.sampled_from(["/signoff ", "/SIGNOFF", "/other"]), NASTY)),
        "text": text, "api_app_id": signing.API_APP_ID, "is_enterprise_install": "false",
        "response_url": draw(_response_url(target, user)),
        "trigger_id": signing.new_trigger_id(),
    }
    rate = draw(RATES)
    mutated = {k: (draw(NASTY) if draw(st.integers(0, 99)) < rate else v)
               for k, v in fields.items() if draw(st.integers(0, 99)) >= rate // 2}
    sub, question = commands.parse(mutated.get("text", ""))
    # A well-formed question would start a run: that is the bot working, not a hostile input.
    starts_run = sub == "ask" and 0 < len(question) <= ask.MAX_QUESTION_CHARS
    if starts_run:
        mutated["text"] = f"ask {'x' * (ask.MAX_QUESTION_CHARS + 1)}"
    padded: dict[str, str] = draw(_padded(mutated))
    return padded


#: Payload types Slack sends that signoff has no listener for.
OTHER_TYPES = ["interactive_message", "workflow_step_edit", "workflow_step_execute",
               "shortcut", "message_action", "block_suggestion", "view_closed",
               "dialog_submission", "dialog_cancellation", "dialog_suggestion",
               "event_callback", "url_verification", "app_rate_limited", "function_executed",
               "BLOCK_ACTIONS", "block_actions ", "View_Submission", ""]


@st.composite
def other_types(draw: st.DrawFn, target: Target) -> Any:
    """A payload of a type the bot does not handle, or a handled type carrying an action,
    callback or command it does not have, with fields Bolt would read missing or mangled."""
    kind = draw(st.sampled_from(OTHER_TYPES) | NASTY)
    payload: dict[str, Any] = {"type": kind, "callback_id": draw(st.just("x") | NASTY),
                               "user": {"id": draw(STRANGERS), "team_id": signing.TEAM_ID},
                               "team": {"id": signing.TEAM_ID}, "token": "t"}
    shape = draw(st.sampled_from(["bare", "bare", "foreign_action", "foreign_view"]))
    if shape == "foreign_action":
        payload = signing.block_actions_payload(
            draw(STRANGERS), draw(st.sampled_from(WRONG_ACTIONS[:-1]) | NASTY),
            draw(_ids(target)), "C0APPROVALS", "1700000000.000100",
            target.world.fake.response_url("C0APPROVALS", user=REP), signing.new_trigger_id())
    elif shape == "foreign_view":
        payload = signing.view_submission_payload(
            draw(STRANGERS), draw(st.sampled_from(WRONG_CALLBACKS) | NASTY),
            draw(_ids(target)), {})
    for key in draw(st.lists(st.sampled_from(["actions", "workflow_step", "view", "event",
                                              "message", "container"]), max_size=3)):
        payload[key] = draw(GARBAGE | st.just({}) | st.just([]))
    return draw(_mutated(payload, draw(st.sampled_from([0, 0, 3, 8]))))


@st.composite
def nested(draw: st.DrawFn, target: Target) -> bytes:
    """A handled payload with one field buried past :data:`intake.MAX_DEPTH` levels.

    Built as text: json.dumps itself recurses, and gives up long before 6,000 levels.
    """
    payload = draw(st.sampled_from([
        signing.block_actions_payload(REP, ids.APPROVE_ACTION, target.token, "C0APPROVALS",
                                      "1700000000.000100", "", signing.new_trigger_id()),
        signing.view_submission_payload(REP, ids.DECLINE_REASON_CALLBACK, target.token, {}),
    ]))
    key = draw(st.sampled_from(["actions", "state", "message", "padding"]))
    where = payload["view"] if key == "state" and "view" in payload else payload
    where[key] = "\x00nest\x00"
    levels = draw(st.integers(intake.MAX_DEPTH, 300) | st.sampled_from([1_000, 5_000, 6_000]))
    opened = draw(st.lists(st.sampled_from(['[', '{"a":', '{"value":']),
                           min_size=levels, max_size=levels))
    closed = "".join("]" if o == "[" else "}" for o in reversed(opened))
    deep = "".join(opened) + json.dumps(draw(SCALARS)) + closed
    text = json.dumps(payload).replace('"\\u0000nest\\u0000"', deep)
    if draw(st.booleans()):
        return text.encode("utf-8", "surrogatepass")
    return urlencode({"payload": text}, errors="surrogatepass").encode("utf-8", "surrogatepass")


def _interactive_body(draw: st.DrawFn, payload: Any) -> bytes:
    how = draw(st.sampled_from(["form", "form", "json", "not_json"]))
    if how == "json":
        return json.dumps(payload).encode()
    text = json.dumps(payload) if how == "form" else draw(NASTY)
    return urlencode({"payload": text}, errors="surrogatepass").encode("utf-8", "surrogatepass")


def _headers(signing_kind: str, body: bytes) -> dict[str, str]:
    now = int(time.time())
    secret, ts, signed = SECRET, now, body
    if signing_kind == "other_secret":
        secret = "0" * 32
    elif signing_kind == "replayed":
        ts = now - 301
    elif signing_kind == "post_dated":
        # Well past the window: the server reads its clock later, which moves a post-dated
        # stamp towards the window (now + 301 was inside it whenever a second ticked over).
        ts = now + 360
    elif signing_kind == "other_body":
        signed = body + b"&x=1"
    mac = hmac.new(secret.encode(), b"v0:%d:" % ts + signed, hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/json" if body[:1] == b"{"
               else "application/x-www-form-urlencoded"}
    if signing_kind != "none":
        headers |= {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={mac}"}
    return headers


def _check(target: Target, body: bytes, signing_kind: str, *, replay: bool = False,
           unhandled: bool = False) -> None:
    headers = _headers(signing_kind, body)
    status = target.send(body, headers)
    target.tried += 1
    if signing_kind == "good":
        assert status < 500, f"{status} for a signed {len(body)}-byte body: {body[:300]!r}"
        if unhandled and len(body) <= MIB:
            assert status == 400, f"{status} for an unhandled payload: {body[:300]!r}"
    else:
        # aiohttp refuses a body past its 1 MiB limit before anyone reads the signature.
        assert status == (413 if len(body) > MIB else 401), (signing_kind, status)
    if replay and signing_kind == "good":
        again = target.send(body, headers)
        target.tried += 1
        target.replays += 1
        # Refused before it was recorded (400, 413) is refused the same way again; an
        # accepted command is refused as seen; a click's single-use token refuses it later.
        if status in (400, 413):
            assert again == status, (status, again)
        elif intake.is_command(body, headers["Content-Type"]):
            assert again == 409, (status, again)
        else:
            assert again < 500, (status, again)
    target.unchanged()


def _hostile(kind: Callable[[Target], st.SearchStrategy[Any]], target: Target) -> None:
    unhandled = kind in (other_types, nested)

    @HOSTILE
    @given(data=st.data(), signing_kind=SIGNINGS, replay=st.sampled_from([False, False, True]))
    def one(data: st.DataObject, signing_kind: str, replay: bool) -> None:
        payload = data.draw(kind(target))
        if isinstance(payload, bytes):
            body = payload
        elif kind is slash_commands:
            body = urlencode(payload, errors="surrogatepass").encode("utf-8", "surrogatepass")
        else:
            body = data.draw(st.composite(_interactive_body)(payload))
        if signing_kind == "good":
            target.unhandled += kind is other_types
            target.deep += kind is nested
        _check(target, body, signing_kind, replay=replay, unhandled=unhandled)

    one()


# --- the tests ----------------------------------------------------------------------------


def test_block_actions__hostile_payloads_never_500_and_change_nothing(database_url: str) -> None:
    with _target(database_url) as target:
        _hostile(block_actions, target)


def test_view_submission__hostile_payloads_never_500_and_change_nothing(
    database_url: str,
) -> None:
    with _target(database_url) as target:
        _hostile(view_submissions, target)


def test_view_submission__without_a_view_type_is_refused_not_a_500(database_url: str) -> None:
    """Found by the search above: Bolt's matchers index ``view["type"]`` unguarded."""
    payload = {"type": "view_submission", "user": {"id": "U0OTHER"},
               "view": {"callback_id": ids.DECLINE_REASON_CALLBACK}}
    body = urlencode({"payload": json.dumps(payload)}).encode()
    with _target(database_url) as target:
        assert target.send(body, _headers("good", body)) == 400
        target.unchanged()


def test_slash_command__hostile_payloads_never_500_and_change_nothing(database_url: str) -> None:
    with _target(database_url) as target:
        _hostile(slash_commands, target)


def test_unhandled_payload_types__signed_are_400_and_change_nothing(database_url: str) -> None:
    with _target(database_url) as target:
        _hostile(other_types, target)


def test_deep_nesting__signed_is_400_and_changes_nothing(database_url: str) -> None:
    with _target(database_url) as target:
        _hostile(nested, target)


def test_events__bad_signatures_are_401_and_the_same_click_signed_works(
    database_url: str,
) -> None:
    """The requester's own Approve: refused unsigned, forged or replayed; accepted signed.

    The accepted control proves the snapshot would have seen a change.
    """
    with _target(database_url) as target:
        body = target.world.click_body(REP, ids.APPROVE_ACTION, target.token).encode()
        for kind in ("none", "other_secret", "replayed", "post_dated", "other_body"):
            assert target.send(body, _headers(kind, body)) == 401, kind
            target.tried += 1
            target.unchanged()

        assert target.send(body, _headers("good", body)) == 200
        after = target.loop.run(runs.get(target.world.db, target.run.id))
        assert after.state is RunState.answered
        assert target.loop.run(target.world.crm.sent_count()) == 1
