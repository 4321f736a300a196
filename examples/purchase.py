"""The incident's flow: a supervised purchase, with a router at the top.

"buy 2 of KB-100 and 1 of MN-300": the ``supervisor`` router sends the run
down its ``purchase`` branch, which checks stock, builds a cart, asks a person
to approve the cart mandate (the preview shows the lines and the total at
today's prices), signs the mandate, completes checkout (an order row in the
example's ``shop_`` tables, reconciled by idempotency key) and analyses the
order, then summarises. The branch's contract requires ``complete_checkout``:
a summary without an order is a failed run, not an answered one. Questions
("is MN-300 in stock?") go down the ``inquiry`` branch, which cannot buy.

The route is decided once, when the run starts, and recorded with the run;
after the pause the recorded route is followed and the route function is not asked
again (a route function that answers None on resume is what production looks
like, and must not make the flow skip its branch).

``SIGNOFF_APP=examples.purchase:app``. Offline, a ScriptedModel plays the
agent; with ``SIGNOFF_MODEL_URL`` and ``SIGNOFF_MODEL_API_KEY`` set, an
OpenAI-compatible model does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from examples import models
from examples.shop import Shop, ShopError, lines_of, total_of
from resume import (
    App,
    Branch,
    Guard,
    Limits,
    Message,
    Model,
    Preview,
    Reconciliation,
    RouteDecision,
    RouteFunction,
    Router,
    Scope,
    Tool,
    ToolCall,
    ToolContext,
    ToolSpec,
    call,
    did_not_finish,
    result_of,
)

ROUTER = "supervisor"
PURCHASE, INQUIRY = "purchase", "inquiry"

ROUTES: dict[str, Branch] = {
    PURCHASE: Branch(
        instructions="Buy what the requester asked for: check stock for every item, build the "
        "cart, have the cart mandate approved, sign it, complete checkout, analyse the order, "
        "then summarise. Never summarise a purchase that has no order.",
        tools=["check_stock", "build_cart", "approve_cart_mandate", "sign_mandate",
               "complete_checkout", "analyse_order"],
        contract=["complete_checkout"],
    ),
    INQUIRY: Branch(
        instructions="Answer questions about products, prices and stock. You cannot buy.",
        tools=["check_stock"],
        contract=[],
    ),
}

BUY = re.compile(r"\b(buy|order|purchase)\b", re.IGNORECASE)
ASKING = re.compile(r"\?|\b(what|which|how|is|are|does|do)\b", re.IGNORECASE)
ITEM = re.compile(r"(?P<qty>\d+)\s*(?:x|of)?\s*(?P<sku>[A-Z]{2}-\d{3})\b", re.IGNORECASE)
SKU = re.compile(r"\b[A-Z]{2}-\d{3}\b", re.IGNORECASE)


async def rule_route(question: str, user_id: str) -> RouteDecision | None:
    """The default route function: a rule on the words of the request."""
    if (word := BUY.search(question)) is not None:
        return RouteDecision(route=PURCHASE, basis=word[1].lower(), how="rule")
    if (word := ASKING.search(question)) is not None:
        return RouteDecision(route=INQUIRY, basis=word[0].lower(), how="rule")
    return None


class StockArgs(BaseModel):
    sku: str = Field(description="Product SKU, e.g. KB-100")


class CartItem(BaseModel):
    sku: str
    quantity: int = Field(gt=0, le=1000)


class CartArgs(BaseModel):
    items: list[CartItem] = Field(min_length=1, max_length=20)


class CartRef(BaseModel):
    cart_id: str


class MandateRef(BaseModel):
    mandate_id: str


class OrderRef(BaseModel):
    order_id: str


class PurchaseTools:
    """The tools' behaviour, over the example shop."""

    def __init__(self, shop: Shop) -> None:
        self.shop = shop

    async def check_stock(self, args: StockArgs, ctx: ToolContext) -> dict[str, Any]:
        product = await (await self.shop.ready()).product(args.sku)
        if product is None:
            return {"error": "unknown_sku", "message": f"no product {args.sku}"}
        return {"sku": product["sku"], "name": product["name"],
                "unit_price": product["unit_price"], "in_stock": product["stock"]}

    async def build_cart(self, args: CartArgs, ctx: ToolContext) -> dict[str, Any]:
        shop = await self.shop.ready()
        return await shop.build_cart(ctx.user_id, [(i.sku, i.quantity) for i in args.items])

    async def mandate_preview(self, args: CartRef, scope: Scope) -> Preview:
        lines = await (await self.shop.ready()).current_lines(args.cart_id)
        fields = [(f"{ln.quantity} x {ln.name} ({ln.sku})",
                   f"${ln.amount:,.2f} (${ln.unit_price:,.2f} each)") for ln in lines]
        return Preview(title=f"Approve the cart mandate for cart {args.cart_id}",
                       fields=[*fields, ("Total", f"${total_of(lines):,.2f}")],
                       body="Approving lets the agent sign this mandate and place the order.")

    async def mandate_guard(self, args: CartRef, scope: Scope, ctx: ToolContext) -> Guard:
        shop = await self.shop.ready()
        for line in await shop.current_lines(args.cart_id):
            product = await shop.product(line.sku)
            if product is None or product["stock"] < line.quantity:
                have = 0 if product is None else product["stock"]
                return Guard.blocked("out_of_stock",
                                     f"{line.sku} has {have} in stock; the cart wants "
                                     f"{line.quantity}")
        return Guard.passed()

    async def approve(self, args: CartRef, ctx: ToolContext) -> dict[str, Any]:
        shop = await self.shop.ready()
        return await shop.approve_mandate(args.cart_id, ctx.user_id, ctx.idempotency_key)

    async def approve_reconcile(self, key: str, args: CartRef) -> Reconciliation:
        found = await (await self.shop.ready()).mandate_with_key(key)
        return Reconciliation.done(found) if found else Reconciliation.not_done()

    async def sign(self, args: MandateRef, ctx: ToolContext) -> dict[str, Any]:
        return await (await self.shop.ready()).sign_mandate(args.mandate_id, ctx.idempotency_key)

    async def sign_reconcile(self, key: str, args: MandateRef) -> Reconciliation:
        found = await (await self.shop.ready()).signed_with_key(key)
        return Reconciliation.done(found) if found else Reconciliation.not_done()

    async def checkout(self, args: MandateRef, ctx: ToolContext) -> dict[str, Any]:
        return await (await self.shop.ready()).checkout(args.mandate_id, ctx.idempotency_key)

    async def checkout_reconcile(self, key: str, args: MandateRef) -> Reconciliation:
        found = await (await self.shop.ready()).order_with_key(key)
        return Reconciliation.done(found) if found else Reconciliation.not_done()

    async def analyse(self, args: OrderRef, ctx: ToolContext) -> dict[str, Any]:
        order = await (await self.shop.ready()).order(args.order_id)
        if order is None:
            raise ShopError(f"no order {args.order_id}")
        lines = lines_of(order["items"])
        largest = max(lines, key=lambda ln: ln.amount)
        return {"order_id": order["order_id"], "status": order["status"], "lines": len(lines),
                "units": sum(ln.quantity for ln in lines), "total": total_of(lines),
                "largest_line": f"{largest.quantity} x {largest.name}"}

    async def scope(self, user_id: str) -> Scope:
        """Everyone may use every tool; the cart mandate still needs a person's approval."""
        return Scope(user_id=user_id, tools="*")


def _pick(*keys: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The evidence of a result: these of its fields, for the final notice."""
    return lambda result: {k: result[k] for k in keys if k in result}


def tools_for(p: PurchaseTools) -> list[Tool[Any]]:
    return [
        Tool(name="check_stock", description="Look up a product's name, price and stock.",
             args=StockArgs, execute=p.check_stock, idempotent=True,
             evidence=_pick("sku", "in_stock")),
        # A repeated build only leaves an unused cart behind: safe to call again.
        Tool(name="build_cart", description="Build a cart from SKUs and quantities.",
             args=CartArgs, execute=p.build_cart, idempotent=True,
             evidence=_pick("cart_id", "total")),
        Tool(name="approve_cart_mandate",
             description="Ask the requester to approve the cart mandate (lines and total).",
             args=CartRef, execute=p.approve, preview=p.mandate_preview, guard=p.mandate_guard,
             reconcile=p.approve_reconcile, confirm=True, dangerous=True,
             evidence=_pick("mandate_id", "total", "status")),
        Tool(name="sign_mandate", description="Sign an approved cart mandate.", args=MandateRef,
             execute=p.sign, reconcile=p.sign_reconcile,
             evidence=_pick("mandate_id", "signature")),
        Tool(name="complete_checkout", description="Place the order for a signed mandate.",
             args=MandateRef, execute=p.checkout, reconcile=p.checkout_reconcile,
             evidence=_pick("order_id", "total", "status")),
        Tool(name="analyse_order", description="Summarise a placed order.", args=OrderRef,
             execute=p.analyse, idempotent=True,
             evidence=_pick("order_id", "units", "total")),
    ]


def build(
    shop: Shop,
    model: Model | None = None,
    route_function: RouteFunction | None = None,
    *,
    limits: Limits | None = None,
    table: Mapping[str, Branch] | None = None,
) -> App:
    """The purchase app over ``shop``; ``table`` replaces the route table (tests: a deploy)."""
    router = Router(name=ROUTER, table=dict(table if table is not None else ROUTES),
                    decide=route_function or rule_route,
                    description="Purchases go to the purchase branch, questions to inquiry.")
    behaviour = PurchaseTools(shop)
    return App(name="purchase", tools=tools_for(behaviour), scope=behaviour.scope,
               model=model or scripted_model(), router=router,
               system_prompt="You are a purchasing assistant supervised by people.",
               limits=limits or Limits(max_steps=12, max_spend_usd=0.5, max_tool_calls=14),
               examples=EXAMPLES)


#: A purchase (through the approval of its cart mandate), and a question (no approval).
EXAMPLES = ["buy 2 of KB-100 and 1 of MN-300", "is MN-300 in stock?"]


Result = tuple[str, dict[str, Any]]


def tool_results(messages: Sequence[Message]) -> list[Result]:
    """(tool name, decoded result) of every tool message, in order."""
    out: list[Result] = []
    for m in messages:
        if m.role == "tool":
            out.append((m.name or "", result_of(m)))
    return out


def purchase_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
    """The offline agent, driven by the conversation so far (so it resumes anywhere)."""
    question = next((m.content or "" for m in messages if m.role == "user"), "")
    results = tool_results(messages)
    if "build_cart" not in {t.name for t in tools}:
        return _inquiry(question, results)
    wanted = [(m["sku"].upper(), int(m["qty"])) for m in ITEM.finditer(question)]
    if not wanted:
        return Message.assistant("Tell me what to buy, like: buy 2 of KB-100 and 1 of MN-300")
    if not results:
        return Message.assistant(None, [ToolCall(name="check_stock", arguments={"sku": sku})
                                        for sku, _ in wanted])
    last, data = results[-1]
    if "error" in data:
        return did_not_finish(data)
    if last == "check_stock":
        stock = {d["sku"]: d["in_stock"] for name, d in results if name == "check_stock"}
        short = [f"{sku} has {stock.get(sku, 0)}" for sku, qty in wanted
                 if stock.get(sku, 0) < qty]
        if short:
            return Message.assistant("Not enough stock: " + "; ".join(short) + ".")
        return call("build_cart", items=[{"sku": s, "quantity": q} for s, q in wanted])
    after = {"build_cart": ("approve_cart_mandate", "cart_id"),
             "approve_cart_mandate": ("sign_mandate", "mandate_id"),
             "sign_mandate": ("complete_checkout", "mandate_id"),
             "complete_checkout": ("analyse_order", "order_id")}
    if last in after:
        name, key = after[last]
        return call(name, **{key: data[key]})
    return Message.assistant(
        f"Ordered {data.get('units')} item(s) in {data.get('lines')} line(s): order "
        f"{data.get('order_id')}, total ${data.get('total', 0):,.2f}, "
        f"largest line {data.get('largest_line')}.")


def _inquiry(question: str, results: list[Result]) -> Message:
    asked = list(dict.fromkeys(s.upper() for s in SKU.findall(question)))
    checked = {d.get("sku", "").upper(): d for name, d in results if name == "check_stock"}
    todo = [sku for sku in asked if sku not in checked]
    if not asked:
        return Message.assistant("Ask me about a product by SKU, e.g. is MN-300 in stock?")
    if todo and not results:
        return Message.assistant(None, [ToolCall(name="check_stock", arguments={"sku": s})
                                        for s in todo])
    lines = [f"{d['sku']} ({d['name']}): {d['in_stock']} in stock at ${d['unit_price']:,.2f}"
             for d in checked.values() if "in_stock" in d]
    return Message.assistant("; ".join(lines) or "I could not find those products.")


def scripted_model() -> Model:
    return models.scripted(purchase_script)


@functools.cache
def shop_from_env() -> Shop:
    """The shop on DATABASE_URL (one per process); its tables are created on first use."""
    return Shop(models.database_from_env())


def app() -> App:
    """``SIGNOFF_APP=examples.purchase:app``."""
    return build(shop_from_env(), models.from_env(scripted_model))


__all__ = ["ROUTES", "app", "build", "purchase_script", "rule_route"]
