"""What the acceptance suite actually checked, counted for the end-of-run summary line.

Scenarios add to these counters *after* they looked at the world (clicks whose
outcome was verified, faults injected, bad inputs sent and checked) and record
what they found lost or duplicated *before* asserting that it is zero, so a
failing run's summary shows the real numbers. ``tests/acceptance/conftest.py``
prints :func:`line` at the end of the test run::

    acceptance: load held 260 clicks, faults injected 6, bad inputs tried 500 (unhandled
    types 60, deeply nested 60, replays 120), lost = 0, ...

Other acceptance tests (hostile input) add to the same counters::

    from tests.acceptance import ledger_summary
    ledger_summary.count(ledger_summary.BAD_INPUTS, 1)
"""

from __future__ import annotations

from collections import Counter

#: Clicks (and slash commands) sent to replicas whose outcome a test checked.
CLICKS = "clicks"
#: Faults injected: a replica SIGKILLed, a Slack outage window, a PostgreSQL restart,
#: a deploy with changed tool definitions.
FAULTS = "faults"
#: Malformed, oversized, unsigned, wrongly signed or replayed requests sent and checked.
BAD_INPUTS = "bad_inputs"
#: Of the bad inputs: signed payloads of a type (or command, action, callback) the bot
#: has no listener for, nested past what it accepts, and signed bytes sent again.
UNHANDLED = "unhandled"
DEEP = "deep"
REPLAYS = "replays"
#: Decisions, notifications or writes that should have happened and did not.
LOST = "lost"
#: Executions or Slack posts that happened more than once.
DUPLICATED = "duplicated"

KINDS = (CLICKS, FAULTS, BAD_INPUTS, UNHANDLED, DEEP, REPLAYS, LOST, DUPLICATED)

_totals: Counter[str] = Counter()


def count(kind: str, n: int = 1) -> None:
    """Add ``n`` to ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown summary counter {kind!r}; one of {KINDS}")
    if n < 0:
        raise ValueError(f"counts only grow; got {n} for {kind}")
    _totals[kind] += n


def totals() -> dict[str, int]:
    """Every counter, zeros included."""
    return {kind: _totals[kind] for kind in KINDS}


def touched() -> bool:
    """True once any test counted anything (the summary line is printed only then)."""
    return any(_totals.values())


def line() -> str:
    t = totals()
    return (f"acceptance: load held {t[CLICKS]} clicks, faults injected {t[FAULTS]}, "
            f"bad inputs tried {t[BAD_INPUTS]} (unhandled types {t[UNHANDLED]}, "
            f"deeply nested {t[DEEP]}, replays {t[REPLAYS]}), lost = {t[LOST]}, "
            f"duplicated = {t[DUPLICATED]}")


def reset() -> None:
    """Forget every count (for the module's own tests)."""
    _totals.clear()
