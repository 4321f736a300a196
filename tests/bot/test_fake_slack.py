"""The Slack stand-in, driven by the real slack_sdk client and the real Bolt app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.sandbox import fake_slack, signing

SECRET = "sandbox-signing-secret"
ALICE = "U0ALICE"

# Slack's published example (python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py).
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TS = 1531420618
VECTOR_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    "&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    "&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    "%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


@pytest.fixture
async def fake() -> AsyncIterator[fake_slack.FakeSlack]:
    async with fake_slack.FakeSlack(user_names={ALICE: "alice"}) as server:
        yield server


@pytest.fixture
def client(fake: fake_slack.FakeSlack) -> AsyncWebClient:
    # The same retry handlers the bot uses: slack_sdk's defaults retry only connection errors.
    return AsyncWebClient(
        token="xoxb-sandbox",
        base_url=fake.api_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(),
            AsyncRateLimitErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=2),
        ],
    )


@pytest.fixture
def bolt_app(client: AsyncWebClient, monkeypatch: pytest.MonkeyPatch) -> AsyncApp:
    # SLACK_CLIENT_ID/SECRET in the environment would silently switch Bolt to OAuth.
    for name in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    # process_before_response: the listener finishes before dispatch returns.
    return AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)


async def _dispatch(app: AsyncApp, body: str) -> int:
    headers: dict[str, str | Sequence[str]] = dict(signing.signed_headers(SECRET, body))
    response = await app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
    return int(response.status)


# -- Web API ---------------------------------------------------------------------


async def test_fake_slack__post_update_and_ephemeral_round_trip(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "Send quote Q-1?"}}]
    posted = await client.chat_postMessage(channel="C1", text="Send quote?", blocks=blocks)
    reply = await client.chat_postMessage(channel="C1", text="details", thread_ts=posted["ts"])
    await client.chat_update(channel="C1", ts=posted["ts"], text="Approved", blocks=[])
    await client.chat_postEphemeral(channel="C1", user=ALICE, text="Already approved")

    card, threaded = fake.messages("C1")
    assert (card.ts, card.text, card.blocks, card.edits) == (posted["ts"], "Approved", [], 1)
    assert (threaded.ts, threaded.thread_ts) == (reply["ts"], posted["ts"])
    assert float(reply["ts"]) > float(posted["ts"])
    assert [(e.user, e.text) for e in fake.ephemerals()] == [(ALICE, "Already approved")]
    assert fake.ephemerals("U0BOB") == []


async def test_fake_slack__update_keeps_blocks_it_was_not_given(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    blocks = [{"type": "actions", "elements": []}]
    posted = await client.chat_postMessage(channel="C1", text="card", blocks=blocks)
    await client.chat_update(channel="C1", ts=posted["ts"], text="new text")
    assert [(m.text, m.blocks) for m in fake.messages()] == [("new text", blocks)]


async def test_fake_slack__update_of_unknown_message_is_message_not_found(
    client: AsyncWebClient,
) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client.chat_update(channel="C1", ts="1700000000.999999", text="x")
    assert raised.value.response["error"] == "message_not_found"


async def test_fake_slack__posting_to_a_user_id_is_a_stable_dm(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    first = await client.chat_postMessage(channel=ALICE, text="one")
    second = await client.chat_postMessage(channel=ALICE, text="two")
    opened = await client.conversations_open(users=ALICE)
    assert first["channel"] == second["channel"] == opened["channel"]["id"]
    assert first["channel"].startswith("D")
    assert [m.text for m in fake.messages(ALICE)] == ["one", "two"]


async def test_fake_slack__auth_and_users_answer_like_slack(client: AsyncWebClient) -> None:
    auth = await client.auth_test()
    user = await client.users_info(user=ALICE)
    assert (auth["user_id"], auth["bot_id"]) == (fake_slack.BOT_USER_ID, fake_slack.BOT_ID)
    assert user["user"]["name"] == "alice"


async def test_fake_slack__bad_token_and_unknown_method_are_errors(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    user_token = AsyncWebClient(token="xoxp-person", base_url=fake.api_url)
    with pytest.raises(SlackApiError) as bad_token:
        await user_token.chat_postMessage(channel="C1", text="hi")
    with pytest.raises(SlackApiError) as unknown:
        await client.api_call("chat.teleport", json={"channel": "C1"})
    assert bad_token.value.response["error"] == "invalid_auth"
    assert unknown.value.response["error"] == "unknown_method"
    assert fake.messages() == []


async def test_fake_slack__views_open_needs_a_fresh_trigger(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    view = {"type": "modal", "callback_id": "signoff.decline_reason", "title": {}, "blocks": []}
    trigger = signing.new_trigger_id()
    opened = await client.views_open(trigger_id=trigger, view=view)
    with pytest.raises(SlackApiError) as reused:
        await client.views_open(trigger_id=trigger, view=view)
    assert reused.value.response["error"] == "expired_trigger_id"
    assert [(v.id, v.view["callback_id"]) for v in fake.views] == [
        (opened["view"]["id"], "signoff.decline_reason")
    ]


# -- failures ----------------------------------------------------------------------


async def test_fake_slack__rate_limit_is_retried_after_retry_after_and_stored_once(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    fake.fail_next("chat.postMessage", status=429, retry_after=1)
    started = time.monotonic()
    await client.chat_postMessage(channel="C1", text="approve?")
    assert time.monotonic() - started >= 1
    assert [c.status for c in fake.calls("chat.postMessage")] == [429, 200]
    assert [m.text for m in fake.messages()] == ["approve?"]


async def test_fake_slack__server_error_is_retried_and_stored_once(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    fake.fail_next("chat.postMessage", status=500)
    await client.chat_postMessage(channel="C1", text="approve?")
    assert [c.status for c in fake.calls("chat.postMessage")] == [500, 200]
    assert len(fake.messages()) == 1


async def test_fake_slack__injected_error_raises_slack_api_error(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    fake.fail_next("chat.postMessage", error="channel_not_found")
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel="C0GONE", text="approve?")
    await client.chat_postMessage(channel="C0GONE", text="again")
    assert raised.value.response["error"] == "channel_not_found"
    assert [m.text for m in fake.messages()] == ["again"]


async def test_fake_slack__outage_fails_every_call_until_it_ends(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    bare = AsyncWebClient(token="xoxb-sandbox", base_url=fake.api_url, retry_handlers=[])
    fake.outage(0.3, status=503)
    with pytest.raises(SlackApiError) as down:
        await bare.chat_postMessage(channel="C1", text="during")
    with pytest.raises(SlackApiError):
        await bare.auth_test()
    await asyncio.sleep(0.35)
    await bare.chat_postMessage(channel="C1", text="after")
    assert down.value.response.status_code == 503
    assert [m.text for m in fake.messages()] == ["after"]


# -- response_url -------------------------------------------------------------------


async def test_fake_slack__response_url_replaces_posts_and_deletes(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    card = await client.chat_postMessage(channel="C1", text="approve?")
    other = await client.chat_postMessage(channel="C1", text="to delete")
    url = fake.response_url("C1", message_ts=card["ts"], user=ALICE)
    hook = AsyncWebhookClient(url)

    replaced = await hook.send(text="Approved", replace_original=True)
    await hook.send(text="only you see this")
    await hook.send(text="for everyone", response_type="in_channel")
    await AsyncWebhookClient(fake.response_url("C1", message_ts=other["ts"])).send_dict(
        {"delete_original": True}
    )

    assert replaced.status_code == 200
    assert [(m.text, m.edits) for m in fake.messages("C1")] == [
        ("Approved", 1),
        ("for everyone", 0),
    ]
    assert [(e.user, e.text) for e in fake.ephemerals()] == [(ALICE, "only you see this")]


async def test_fake_slack__response_url_works_five_times(fake: fake_slack.FakeSlack) -> None:
    hook = AsyncWebhookClient(fake.response_url("C1", user=ALICE))
    statuses = [(await hook.send(text=f"reply {n}")).status_code for n in range(6)]
    assert statuses == [200] * 5 + [404]
    assert len(fake.ephemerals(ALICE)) == 5


async def test_fake_slack__state_endpoint_nests_threads(
    fake: fake_slack.FakeSlack, client: AsyncWebClient
) -> None:
    parent = await client.chat_postMessage(channel="C1", text="card")
    await client.chat_postMessage(channel="C1", text="reply", thread_ts=parent["ts"])
    await client.chat_postEphemeral(channel="C1", user=ALICE, text="psst")
    async with aiohttp.ClientSession() as session, session.get(f"{fake.base_url}/_state") as r:
        state: dict[str, Any] = await r.json()
    assert [(m["text"], [x["text"] for x in m["replies"]]) for m in state["messages"]] == [
        ("card", ["reply"])
    ]
    assert [e["text"] for e in state["ephemerals"]] == ["psst"]
    assert [c["id"] for c in state["channels"]] == ["C1"]


# -- signing ------------------------------------------------------------------------


def test_signing__matches_slacks_test_vector() -> None:
    assert signing.signature(VECTOR_SECRET, VECTOR_BODY, VECTOR_TS) == VECTOR_SIGNATURE
    headers = signing.signed_headers(VECTOR_SECRET, VECTOR_BODY, timestamp=VECTOR_TS)
    assert headers["X-Slack-Signature"] == VECTOR_SIGNATURE
    assert headers["X-Slack-Request-Timestamp"] == str(VECTOR_TS)


def test_signing__verifier_accepts_signed_and_rejects_tampered_or_old() -> None:
    verifier = SignatureVerifier(SECRET)
    body = signing.slash_command_body(ALICE, "ask hello", "C1", "http://x/r", "1.2.3")
    stale = signing.signed_headers(SECRET, body, timestamp=int(time.time()) - 301)
    assert verifier.is_valid_request(body, signing.signed_headers(SECRET, body))
    assert not verifier.is_valid_request(body + "&x=1", signing.signed_headers(SECRET, body))
    assert not verifier.is_valid_request(body, signing.signed_headers("other-secret", body))
    assert not verifier.is_valid_request(body, stale)


async def test_signing__bolt_routes_a_signed_button_click_to_the_fake(
    fake: fake_slack.FakeSlack, client: AsyncWebClient, bolt_app: AsyncApp
) -> None:
    card = await client.chat_postMessage(channel="C1", text="approve?")
    seen: list[tuple[str, str, str]] = []

    @bolt_app.action("signoff.approve")
    async def approve(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        action = body["actions"][0]
        seen.append((body["user"]["id"], action["value"], body["container"]["message_ts"]))
        await respond(text="Approved", replace_original=True)

    click = signing.block_actions_body(
        ALICE,
        "signoff.approve",
        "token-123",
        "C1",
        card["ts"],
        fake.response_url("C1", message_ts=card["ts"], user=ALICE),
        signing.new_trigger_id(),
    )
    assert await _dispatch(bolt_app, click) == 200
    assert seen == [(ALICE, "token-123", card["ts"])]
    assert [m.text for m in fake.messages("C1")] == ["Approved"]
    assert len(fake.calls("auth.test")) == 1  # Bolt checks its static token once


async def test_signing__bolt_routes_a_signed_slash_command_and_view_submission(
    fake: fake_slack.FakeSlack, bolt_app: AsyncApp
) -> None:
    @bolt_app.command("/signoff")
    async def command(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        await respond(text=f"you asked: {command['text']}")

    submitted: list[tuple[str, str]] = []

    @bolt_app.view("signoff.decline_reason")
    async def reason(ack: AsyncAck, view: dict[str, Any]) -> None:
        await ack()
        value = view["state"]["values"]["reason"]["reason_input"]["value"]
        submitted.append((view["private_metadata"], value))

    slash = signing.slash_command_body(
        ALICE, "ask hi", "C1", fake.response_url("C1", user=ALICE), signing.new_trigger_id()
    )
    values = {"reason": {"reason_input": {"type": "plain_text_input", "value": "too big"}}}
    submission = signing.view_submission_body(ALICE, "signoff.decline_reason", "tok-9", values)

    assert await _dispatch(bolt_app, slash) == 200
    assert await _dispatch(bolt_app, submission) == 200
    assert [(e.user, e.text) for e in fake.ephemerals()] == [(ALICE, "you asked: ask hi")]
    assert submitted == [("tok-9", "too big")]


async def test_fake_slack__history_and_replies_return_metadata_only_when_asked(
    client: AsyncWebClient,
) -> None:
    meta = {"event_type": "signoff_card", "event_payload": {"run_id": "run_1", "token": "t"}}
    root = await client.chat_postMessage(channel="C0HIST", text="card", metadata=meta)
    await client.chat_postMessage(channel="C0HIST", text="reply", thread_ts=root["ts"],
                                  metadata=meta)
    await client.chat_postMessage(channel="C0HIST", text="later")

    plain = await client.conversations_history(channel="C0HIST")
    full = await client.conversations_history(channel="C0HIST", include_all_metadata=True)
    thread = await client.conversations_replies(channel="C0HIST", ts=root["ts"],
                                                include_all_metadata=True)

    assert [m["text"] for m in plain["messages"]] == ["later", "card"]  # newest first, no replies
    assert all("metadata" not in m for m in plain["messages"])
    assert [m.get("metadata") for m in full["messages"]] == [None, meta]
    assert [(m["text"], m["metadata"]) for m in thread["messages"]] == [
        ("card", meta), ("reply", meta)]
    with pytest.raises(SlackApiError) as refused:
        await client.chat_postMessage(channel="C0HIST", text="x", metadata={"event_payload": {}})
    assert refused.value.response["error"] == "invalid_metadata_format"
