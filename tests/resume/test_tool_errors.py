"""A bad tool call from the model is an error result the model reads, never a crash.

Arguments that fail validation, arguments that are not a JSON object, a tool
that does not exist (or that the run's route does not offer): each becomes a
tool message naming the error, the tool does not run, nobody is asked to
approve anything, and the run carries on with the model's next turn.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

from examples import purchase, shop
from resume.apps import App
from resume.messages import Message, ToolCall
from resume.runtime import Runtime
from resume.scripted import ScriptedModel
from resume.tools import Scope, Tool, ToolContext
from store import claims, events, ledger, outbox, runs
from store.engine import Database
from store.states import LedgerStatus, RunState
from tests import journeys


class CountArgs(BaseModel):
    n: int = 1  # an empty object is valid: only the malformed check refuses `{"n": 2`


class SendArgs(BaseModel):
    to: str


def _app(model: ScriptedModel, executed: list[tuple[str, dict[str, Any]]]) -> App:
    async def count(args: CountArgs, ctx: ToolContext) -> dict[str, Any]:
        executed.append(("count", args.model_dump()))
        return {"counted": args.n}

    async def send(args: SendArgs, ctx: ToolContext) -> dict[str, Any]:
        executed.append(("send", args.model_dump()))
        return {"sent_to": args.to}

    async def scope(user_id: str) -> Scope:
        return Scope(user_id=user_id, tools="*")

    return App(name="errors", model=model, scope=scope, tools=[
        Tool(name="count", description="Count.", args=CountArgs, execute=count),
        Tool(name="send", description="Send, once a person approves.", args=SendArgs,
             execute=send, confirm=True),
    ])


def _call(name: str, arguments: dict[str, Any] | None = None, raw: str | None = None,
          call_id: str = "call_bad") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments or {}, raw_arguments=raw)


BAD_CALLS = [
    pytest.param(_call("count", {"n": "many"}), "invalid_arguments",
                 ["invalid arguments", "n:", "integer"], id="invalid_arguments"),
    pytest.param(_call("send", {"recipient": "ops"}), "invalid_arguments",
                 ["invalid arguments", "to:", "Field required"], id="invalid_confirmed_call"),
    pytest.param(_call("count", raw='{"n": 2'), "invalid_arguments",
                 ["not a JSON object"], id="malformed_json"),
    pytest.param(_call("count", raw='["n", 2]'), "invalid_arguments",
                 ["not a JSON object"], id="not_an_object"),
    pytest.param(_call("launch_rockets", {"n": 1}), "unknown_tool",
                 ["no tool named", "launch_rockets"], id="unknown_tool"),
]


def _tool_messages(conversation: list[Message]) -> dict[str, Message]:
    return {m.tool_call_id or "": m for m in conversation if m.role == "tool"}


@pytest.mark.parametrize(("bad", "code", "says"), BAD_CALLS)
async def test_bad_call__the_model_reads_the_error_and_the_run_carries_on(
    db: Database, bad: ToolCall, code: str, says: list[str],
) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel.turns([
        Message.assistant(None, [bad]),
        Message.assistant(None, [_call("count", {"n": 2}, call_id="call_good")]),
        "counted after the refusal",
    ])
    rt = Runtime(db=db, app=_app(model, executed))

    run = await journeys.start(rt, "U_REP", "count, please")

    final = await runs.get(db, run.id)
    assert final.state is RunState.answered, final.halt_reason
    assert final.answer == "counted after the refusal"
    # What the model was given on its next turn: the refused call's result names the error.
    seen = _tool_messages(model.seen[1])
    assert list(seen) == ["call_bad"]
    refused = seen["call_bad"]
    assert refused.name == bad.name
    result = json.loads(refused.content or "")
    assert result["error"] == code
    for words in says:
        assert words in result["message"]
    # The bad call ran nothing, asked nobody, and the next call ran as scripted.
    assert executed == [("count", {"n": 2})]
    assert [(e.call_id, e.tool, e.status) for e in await ledger.for_run(db, run.id)] == [
        ("call_good", "count", LedgerStatus.succeeded)]
    assert await claims.approvals_of(db, run.id) == []
    assert [r.kind for r in await outbox.for_run(db, run.id)] == ["run_notice"]
    assert [e.data for e in await events.for_run(db, run.id, kind="tool_refused")] == [
        {"call_id": "call_bad", "code": code}]
    assert final.tool_calls == 1 and final.step == 3
    # The stored conversation says the same as what the model saw.
    stored = [Message.model_validate(m) for m in await runs.conversation(db, run.id)]
    assert _tool_messages(stored)["call_bad"] == refused


async def test_bad_call__beside_a_good_one_in_the_same_turn_refuses_only_itself(
    db: Database,
) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel.turns([
        Message.assistant(None, [_call("count", raw="n=3", call_id="call_bad"),
                                 _call("count", {"n": 4}, call_id="call_good")]),
        "done",
    ])
    rt = Runtime(db=db, app=_app(model, executed))

    run = await journeys.start(rt, "U_REP", "count twice")

    final = await runs.get(db, run.id)
    assert final.state is RunState.answered and final.answer == "done"
    seen = _tool_messages(model.seen[1])
    assert json.loads(seen["call_bad"].content or "")["error"] == "invalid_arguments"
    assert json.loads(seen["call_good"].content or "") == {"counted": 4}
    assert executed == [("count", {"n": 4})]
    assert [e.call_id for e in await ledger.for_run(db, run.id)] == ["call_good"]


async def test_bad_call__a_tool_the_route_does_not_offer_is_unknown_and_never_runs(
    db: Database,
) -> None:
    shop_ = shop.Shop(db)
    await shop_.setup()
    build = ToolCall(id="call_bad", name="build_cart",
                     arguments={"items": [{"sku": "KB-100", "quantity": 1}]})
    model = ScriptedModel.turns([Message.assistant(None, [build]), "I cannot buy from here."])
    rt = Runtime(db=db, app=purchase.build(shop_, model))

    run = await journeys.start(rt, "U_BUYER", "is KB-100 in stock?")

    final = await runs.get(db, run.id)
    assert final.route == purchase.INQUIRY
    assert final.state is RunState.answered and final.answer == "I cannot buy from here."
    refused = _tool_messages(model.seen[1])["call_bad"]
    result = json.loads(refused.content or "")
    assert result["error"] == "unknown_tool" and "build_cart" in result["message"]
    assert await ledger.for_run(db, run.id) == []
    async with db.read() as conn:
        carts = (await conn.execute(select(func.count()).select_from(shop.carts))).scalar_one()
    assert carts == 0
