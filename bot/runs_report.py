"""Runs for people at a terminal: `signoff runs list` and `signoff runs show`.

Everything printed passes through `redacted()` first. A pending token is a
bearer credential (whoever holds it can approve the request), so a report
shows only its first few characters, wherever the token appears: the run row,
the approval records, event data, outbox payloads, even message text. The
JSON output is redacted the same way.

Text output is also made safe for a terminal: stored text (model output, tool
results) is shown on one line with control characters escaped, so a message
cannot move the cursor or recolour the screen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from store import claims, events, ledger, outbox, runs
from store.engine import Database
from store.records import Approval, Event, LedgerEntry, OutboxRow, Run
from store.states import OutboxState, RunState

#: Characters of a token a report may show: enough to tell two cards apart, far
#: too few to act as the token.
TOKEN_PREFIX = 6
#: Width of the question column in `runs list`, and of long cells in `runs show`.
QUESTION_WIDTH = 48
CELL_WIDTH = 72
NONE = "-"

Record = TypeVar("Record")


@dataclass(frozen=True)
class RunDetail:
    """A run and everything stored about it, as `signoff runs show` prints it."""

    run: Run
    messages: list[dict[str, Any]]
    events: list[Event]
    ledger: list[LedgerEntry]
    approvals: list[Approval]
    outbox: list[OutboxRow]


async def load_detail(db: Database, run_id: str) -> RunDetail:
    """Read the run and its rows; RunNotFound if there is no such run. Not redacted."""
    run = await runs.get(db, run_id)
    return RunDetail(
        run=run,
        messages=await runs.conversation(db, run_id),
        events=await events.for_run(db, run_id),
        ledger=await ledger.for_run(db, run_id),
        approvals=await claims.approvals_of(db, run_id),
        outbox=await outbox.for_run(db, run_id),
    )


# --- Redaction -----------------------------------------------------------------------------


def mask(token: str) -> str:
    """The printable form of a token: its first characters, then `...`."""
    return token[:TOKEN_PREFIX] + "..."


def _scrub(value: Any, tokens: Sequence[str]) -> Any:
    if isinstance(value, Enum):  # RunState and friends are str enums: keep their type.
        return value
    if isinstance(value, str):
        for token in tokens:
            value = value.replace(token, mask(token))
        return value
    if isinstance(value, dict):
        return {_scrub(k, tokens): _scrub(v, tokens) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, tokens) for v in value]
    return value


def _scrub_record(record: Record, tokens: Sequence[str]) -> Record:
    assert dataclasses.is_dataclass(record) and not isinstance(record, type)
    changes = {f.name: _scrub(getattr(record, f.name), tokens) for f in dataclasses.fields(record)}
    return dataclasses.replace(record, **changes)


def _tokens(run: Run, cards: Iterable[Approval] = ()) -> list[str]:
    found = {run.pending_token, *(a.token for a in cards)}
    # Longest first, so a token that contains another is masked whole.
    return sorted((t for t in found if t), key=len, reverse=True)


def redacted_run(run: Run) -> Run:
    return _scrub_record(run, _tokens(run))


def redacted(detail: RunDetail) -> RunDetail:
    """The detail with every known token of the run masked, wherever it appears."""
    tokens = _tokens(detail.run, detail.approvals)
    return RunDetail(
        run=_scrub_record(detail.run, tokens),
        messages=[_scrub(m, tokens) for m in detail.messages],
        events=[_scrub_record(e, tokens) for e in detail.events],
        ledger=[_scrub_record(e, tokens) for e in detail.ledger],
        approvals=[_scrub_record(a, tokens) for a in detail.approvals],
        outbox=[_scrub_record(o, tokens) for o in detail.outbox],
    )


# --- JSON ----------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def to_json(value: RunDetail | Sequence[Run]) -> str:
    """Redacted records (a detail, or a list of runs) as indented JSON."""
    if isinstance(value, RunDetail):
        doc = _jsonable(redacted(value))
    else:
        doc = [_jsonable(redacted_run(run)) for run in value]
    return json.dumps(doc, indent=2, ensure_ascii=False)


# --- Text ----------------------------------------------------------------------------------


def one_line(value: Any, width: int = CELL_WIDTH) -> str:
    """Stored text or a document on one line, control characters escaped, cut to `width`."""
    if value is None:
        return NONE
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in value
    )
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else NONE


def _utc(value: datetime | None) -> str:
    return f"{when(value)} UTC" if value is not None else NONE


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Columns aligned on the widest cell; the last column is not padded."""
    body = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in body) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return "\n".join(indent + line for line in lines)


def runs_table(found: Sequence[Run]) -> str:
    rows = [
        [
            run.id,
            run.state.value,
            run.halt_reason or NONE,
            run.user_id,
            str(run.step),
            f"${run.spend_usd:.4f}",
            str(run.tool_calls),
            when(run.updated_at),
            one_line(run.question, QUESTION_WIDTH),
        ]
        for run in found
    ]
    return table(
        ["ID", "STATE", "REASON", "USER", "STEP", "SPEND", "TOOLS", "UPDATED (UTC)", "QUESTION"],
        rows,
    )


def _budget(run: Run) -> str:
    """Used against bound for each budget dimension, e.g. `steps 3/10, spend $0.02/$1.00`."""
    limits = dict(run.limits or {})

    def part(label: str, key: str, used: float, show: Callable[[float], str]) -> str:
        bound = limits.pop(key, None)
        if isinstance(bound, int | float):
            return f"{label} {show(used)}/{show(bound)}"
        return f"{label} {show(used)}" + (f"/{bound}" if bound is not None else "")

    parts = [
        part("steps", "max_steps", run.step, lambda v: f"{v:g}"),
        part("spend", "max_spend_usd", run.spend_usd, lambda v: f"${v:.4f}"),
        part("tool calls", "max_tool_calls", run.tool_calls, lambda v: f"{v:g}"),
        part("elapsed", "max_elapsed_ms", run.elapsed_ms, lambda v: f"{v / 1000:.1f}s"),
    ]
    return ", ".join(parts + [f"{k} {one_line(v, 40)}" for k, v in limits.items()])


def _pending(pending: dict[str, Any] | None) -> str:
    if not pending:
        return NONE
    if "tool" in pending:
        return f"{one_line(pending['tool'], 40)} {one_line(pending.get('args'))}"
    return one_line(pending)


def _scope(run: Run) -> str:
    if run.scope_snapshot is None and run.scope_resolved_at is None:
        return NONE
    return f"{one_line(run.scope_snapshot)} (resolved {_utc(run.scope_resolved_at)})"


def _run_fields(run: Run) -> list[tuple[str, str]]:
    waiting = [
        ("pending", _pending(run.pending)),
        ("preview", one_line(run.pending_preview)),
        ("digest", run.pending_preview_digest or NONE),
        ("token", run.pending_token or NONE),
        ("expires", _utc(run.expires_at)),
    ]
    return [
        ("state", run.state.value),
        ("reason", run.halt_reason or NONE),
        ("user", run.user_id),
        ("question", one_line(run.question)),
        ("route", run.route or NONE),
        ("answer", one_line(run.answer)),
        ("budget", _budget(run)),
        ("started", _utc(run.started_at)),
        ("updated", _utc(run.updated_at)),
        ("heartbeat", _utc(run.heartbeat_at)),
        ("lease", f"owner {run.owner_id or NONE}, epoch {run.lease_epoch}"),
        ("recoveries", str(run.recovery_attempts)),
        # What a run waits on means nothing once it waits no more.
        *(waiting if run.state is RunState.suspended else []),
        ("scope", _scope(run)),
        ("snapshot", f"v{run.snapshot_version}, app {run.app_fingerprint[:12]}"),
        ("slack", f"{run.slack_channel or NONE} {run.slack_ts or ''}".rstrip()),
    ]


def next_attempt(row: OutboxRow) -> str:
    """When a row is tried next; a row no longer pending is never tried again."""
    return when(row.next_attempt_at) if row.state is OutboxState.pending else NONE


def _message_row(seq: int, message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    text = one_line(message.get("content")) if message.get("content") is not None else ""
    if calls:
        called = "; ".join(
            f"{c.get('name')}({one_line(c.get('arguments'), 40)}) [{c.get('id') or NONE}]"
            for c in calls
        )
        text = (text + " " if text else "") + "calls " + called
    if message.get("role") == "tool":
        text = f"[{message.get('name') or NONE} {message.get('tool_call_id')}] {text}"
    return [str(seq), str(message.get("role")), one_line(text, CELL_WIDTH + 40)]


def _section(title: str, headers: Sequence[str], rows: list[list[str]]) -> str:
    if not rows:
        return f"{title} (0)\n  none"
    return f"{title} ({len(rows)})\n" + table(headers, rows, indent="  ")


def run_text(detail: RunDetail) -> str:
    """The redacted detail as readable text."""
    d = redacted(detail)
    fields = _run_fields(d.run)
    label_w = max(len(label) for label, _ in fields)
    head = [f"Run {d.run.id}"] + [f"  {label.ljust(label_w)}  {v}" for label, v in fields]
    sections = [
        _section("Messages", ["SEQ", "ROLE", "CONTENT"],
                 [_message_row(i, m) for i, m in enumerate(d.messages, start=1)]),
        _section("Events", ["SEQ", "KIND", "AT (UTC)", "DATA"],
                 [[str(e.seq), e.kind, when(e.at), one_line(e.data)] for e in d.events]),
        _section("Ledger", ["CALL", "TOOL", "STATUS", "STARTED (UTC)", "RESULT"],
                 [[e.call_id, e.tool, e.status.value, when(e.started_at), one_line(e.result)]
                  for e in d.ledger]),
        _section("Approvals", ["TOKEN", "TOOL", "CALL", "DECISION", "BY", "AT (UTC)", "REASON"],
                 [[a.token, a.tool, a.call_id, a.decision or "pending", a.decided_by or NONE,
                   when(a.decided_at), one_line(a.reason, 40)] for a in d.approvals]),
        _section("Outbox", ["ID", "KIND", "STATE", "ATTEMPTS", "NEXT (UTC)", "LAST ERROR"],
                 [[str(o.id), o.kind, o.state.value, str(o.attempts), next_attempt(o),
                   one_line(o.last_error)] for o in d.outbox]),
    ]
    return "\n\n".join(["\n".join(head), *sections])
