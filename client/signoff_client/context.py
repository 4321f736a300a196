"""What the code running inside a round can see: the run, and the call being executed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signoff_client.runs import Run


@dataclass(frozen=True)
class CallContext:
    """The call a tool function is executing: pass ``idempotency_key`` on to the system it
    writes to, so ``reconcile`` can later ask that system whether the write happened."""

    run_id: str
    call_id: str
    idempotency_key: str


current_run: ContextVar[Run | None] = ContextVar("signoff_current_run", default=None)
_current_call: ContextVar[CallContext | None] = ContextVar("signoff_current_call", default=None)


@contextmanager
def running(run: Run) -> Iterator[Run]:
    """``run`` is the current run for the code inside (per task: one gate serves many runs)."""
    token = current_run.set(run)
    try:
        yield run
    finally:
        current_run.reset(token)


def current_call() -> CallContext | None:
    """The call being executed, inside a tool function run by signoff; None elsewhere."""
    return _current_call.get()
