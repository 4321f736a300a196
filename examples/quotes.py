"""The reference scenario: a sales rep asks for a quote; sending it needs approval.

"draft a quote for Henderson, 200 of SKU-4411": look up the account, draft the
quote, send it. Sending needs the requester's approval; its preview shows the
terms as they are *now* (a tier change while waiting changes the digest); its
guard refuses accounts on credit hold; its reconcile finds a sent quote by
idempotency key, so a crash mid-send never sends twice.

``SIGNOFF_APP=examples.quotes:app`` (the default). Offline, a ScriptedModel
plays the agent; with ``SIGNOFF_MODEL_URL`` and ``SIGNOFF_MODEL_API_KEY`` set,
an OpenAI-compatible model does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from examples import models
from examples.crm import CRM, PRICES, TIERS, price
from resume import (
    App,
    Guard,
    Limits,
    Message,
    Model,
    Preview,
    Reconciliation,
    Scope,
    Tool,
    ToolContext,
    ToolSpec,
    call,
    did_not_finish,
    result_of,
)

ASK = re.compile(r"quote for\s+(?P<account>[\w .&-]+?),\s*(?P<qty>\d+)\s+(?:x\s+|of\s+)?"
                 r"(?P<sku>[A-Z]+-\d+)", re.IGNORECASE)


class LookupArgs(BaseModel):
    account: str = Field(description="Account name, e.g. Henderson")


class DraftArgs(BaseModel):
    account: str
    sku: str = Field(description="Product SKU, e.g. SKU-4411")
    quantity: int = Field(gt=0, le=1_000_000)


class SendArgs(BaseModel):
    quote_id: str


class QuoteTools:
    """The tools' behaviour, over the example CRM."""

    def __init__(self, crm: CRM) -> None:
        self.crm = crm

    async def lookup(self, args: LookupArgs, ctx: ToolContext) -> dict[str, Any]:
        account = await self.crm.account(args.account)
        if account is None:
            return {"error": "unknown_account", "message": f"no account named {args.account}"}
        return {"account": account["name"], "discount_tier": account["discount_tier"],
                "credit_hold": account["credit_hold"]}

    async def draft(self, args: DraftArgs, ctx: ToolContext) -> dict[str, Any]:
        account = await self.crm.account(args.account)
        if account is None or args.sku not in PRICES:
            return {"error": "unknown_account_or_sku", "message": "check the account and SKU"}
        row = await self.crm.draft(account["name"], args.sku, args.quantity,
                                   account["discount_tier"], ctx.idempotency_key)
        return {"quote_id": row["id"], "account": row["account"], "total": row["total"]}

    async def terms(self, quote_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        quote = await self.crm.quote(quote_id)
        if quote is None:
            raise ValueError(f"no quote {quote_id}")
        account = await self.crm.account(quote["account"])
        assert account is not None
        return quote, account

    async def send_preview(self, args: SendArgs, scope: Scope) -> Preview:
        quote, account = await self.terms(args.quote_id)
        p = price(quote["sku"], quote["quantity"], account["discount_tier"])
        return Preview(
            title=f"Send quote {quote['id']} to {quote['account']}",
            fields=[("Account", quote["account"]), ("SKU", quote["sku"]),
                    ("Quantity", str(quote["quantity"])), ("Unit price", f"${p.unit_price:,.2f}"),
                    ("Discount tier", f"{p.discount_tier} ({p.discount_pct:g}%)"),
                    ("Total", f"${p.total:,.2f}")],
        )

    async def send_guard(self, args: SendArgs, scope: Scope, ctx: ToolContext) -> Guard:
        _, account = await self.terms(args.quote_id)
        if account["credit_hold"]:
            return Guard.blocked("credit_hold", f"{account['name']} is on credit hold")
        return Guard.passed()

    async def send(self, args: SendArgs, ctx: ToolContext) -> dict[str, Any]:
        quote, account = await self.terms(args.quote_id)
        p = price(quote["sku"], quote["quantity"], account["discount_tier"])
        return await self.crm.send(args.quote_id, p, ctx.idempotency_key)

    async def send_reconcile(self, key: str, args: SendArgs) -> Reconciliation:
        found = await self.crm.sent_with_key(key)
        return Reconciliation.done(found) if found else Reconciliation.not_done()

    async def scope(self, user_id: str) -> Scope:
        # Every run resolves its scope before any tool runs: the tables exist from here on.
        await self.crm.ready()
        names = ["lookup_account", "draft_quote"]
        if await self.crm.can_send(user_id):
            names.append("send_quote")
        return Scope(user_id=user_id, tools=names, resources={"account": ["*"]})


def build(crm: CRM, model: Model | None = None, *, limits: Limits | None = None) -> App:
    q = QuoteTools(crm)
    tools: list[Tool[Any]] = [
        Tool(name="lookup_account", description="Look up an account's tier and credit status.",
             args=LookupArgs, execute=q.lookup, idempotent=True),
        # Keyed by the call's idempotency key: a recovered run drafts again, not twice.
        Tool(name="draft_quote", description="Draft a quote (not sent).", args=DraftArgs,
             execute=q.draft, idempotent=True),
        Tool(name="send_quote", description="Send a drafted quote to the customer.",
             args=SendArgs, execute=q.send, preview=q.send_preview, guard=q.send_guard,
             reconcile=q.send_reconcile, confirm=True,
             evidence=lambda r: {k: r[k] for k in ("quote_id", "account", "total") if k in r}),
    ]
    return App(name="quotes", tools=tools, scope=q.scope, model=model or scripted_model(),
               system_prompt="You draft and send sales quotes. Send only drafted quotes.",
               # A quote that was not sent is not a finished request, whatever the agent says.
               contract=["send_quote"],
               limits=limits or Limits(max_steps=8, max_spend_usd=0.5, max_tool_calls=8),
               examples=EXAMPLES,
               # The sandbox page's CRM panel: tiers and credit holds to change while a card
               # waits, and the quotes sent.
               world=crm.ready)


#: Questions the offline agent understands (any account the CRM knows works the same way).
EXAMPLES = ["draft a quote for Henderson, 200 of SKU-4411",
            "draft a quote for Acme, 40 of SKU-2020"]


def _last_result(messages: Sequence[Message]) -> tuple[str | None, dict[str, Any]]:
    """(tool name, decoded result) of the last tool message since the request."""
    for m in reversed(messages):
        if m.role == "tool":
            return m.name, result_of(m)
        if m.role == "user":
            break
    return None, {}


def quote_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
    """The offline agent: understands 'draft a quote for <account>, <qty> of <SKU>'."""
    question = next((m.content or "" for m in messages if m.role == "user"), "")
    match = ASK.search(question)
    if match is None:
        return Message.assistant("Ask me like this: draft a quote for Henderson, 200 of SKU-4411")
    account, qty, sku = match["account"].strip(), int(match["qty"]), match["sku"].upper()
    last, data = _last_result(messages)
    if last is None:
        return call("lookup_account", account=account)
    if "error" in data:
        return did_not_finish(data)
    if last == "lookup_account":
        return call("draft_quote", account=data["account"], sku=sku, quantity=qty)
    if last == "draft_quote":
        return call("send_quote", quote_id=data["quote_id"])
    return Message.assistant(f"Sent quote {data.get('quote_id')} to {data.get('account')}: "
                             f"total ${data.get('total', 0):,.2f}.")


def scripted_model() -> Model:
    return models.scripted(quote_script)


@functools.cache
def crm_from_env() -> CRM:
    """The CRM on DATABASE_URL (one per process), shared by the app and the sandbox."""
    return CRM(models.database_from_env())


def app() -> App:
    """``SIGNOFF_APP=examples.quotes:app``; the CRM's tables are created on first use."""
    return build(crm_from_env(), models.from_env(scripted_model))


__all__ = ["TIERS", "app", "build", "quote_script"]
