"""A small payments system for the client's tests: refunds in a JSON file, keyed.

A file, not memory, so an agent in another process (killed, restarted, or in a venv of
its own) writes to the same place the test counts. Each refund records the idempotency
key signoff gave its execution, which is what ``find`` (the tool's reconcile) looks up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from signoff_client import Guard, Preview, Reconciliation, current_call


class Payments:
    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists():
            self._save({"orders": {}, "refunds": []})

    def _load(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def _save(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def add_order(self, order_id: str, total: float, *, hold: bool = False) -> None:
        data = self._load()
        data["orders"][order_id] = {"total": total, "hold": hold}
        self._save(data)

    def set_total(self, order_id: str, total: float) -> None:
        data = self._load()
        data["orders"][order_id]["total"] = total
        self._save(data)

    def order(self, order_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._load()["orders"][order_id]
        return found

    def refunds(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self._load()["refunds"]
        return listed

    # -- the tool and its hooks, as an agent would write them ------------------------------

    def refund_order(self, order_id: str, amount: float) -> dict[str, Any]:
        call = current_call()
        data = self._load()
        refund = {"id": f"re_{len(data['refunds']) + 1}", "order_id": order_id,
                  "amount": amount, "key": call.idempotency_key if call else None}
        data["refunds"].append(refund)
        self._save(data)
        return refund

    def render(self, args: dict[str, Any]) -> Preview:
        order = self.order(args["order_id"])
        return Preview(title=f"Refund order {args['order_id']}",
                       fields=[("Order", args["order_id"]), ("Amount", f"{args['amount']:.2f}"),
                               ("Order total", f"{order['total']:.2f}")])

    def check(self, args: dict[str, Any]) -> Guard:
        if self.order(args["order_id"])["hold"]:
            return Guard.blocked("order_on_hold", f"order {args['order_id']} is on hold")
        return Guard.passed()

    def find(self, idempotency_key: str, args: dict[str, Any]) -> Reconciliation:
        for refund in self.refunds():
            if refund["key"] == idempotency_key:
                return Reconciliation.done(refund)
        return Reconciliation.not_done()
