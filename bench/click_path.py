"""Click path: the files of bot/, resume/ and store/ an Approve click passes through.

One signed Approve click through the real server (``tests/bot/harness.py``:
real HTTP, signature verification on, the quotes example, the Slack stand-in),
traced with ``sys.setprofile`` from the request until the tool (the quotes
``send``) is called. ``bot/sandbox/`` (the stand-in) is left out.

What counts is code running in the click's own context: a context variable is
set when aiohttp starts handling the click's ``POST /slack/events``, and every
task the click spawns (Bolt's listener, the run's drive) inherits it. A loop
started earlier (the outbox relay, the webhook sender, the scheduler) does not
have it, so its work is not on the path even when the click's commit wakes it.
Only fresh calls count: a coroutine resuming after an ``await`` is not a new visit.

Prints the files in the order they are first entered (with the functions
called in each), the count per package, how often the path entered each file
again after leaving it, the sequence of layer transitions
(each call from one layer into another, in order, repeats collapsed), and
every call that goes upward (store -> resume, resume -> bot, store -> bot: a
hook or callback pointing the wrong way).

    python -m bench.click_path

Measured on the quotes example, SQLite: 21 files (bot 5, resume 10, store 6);
transitions ``bot>resume resume>store bot>resume resume>store`` (decide before
the ack's work ends, then the drive that ``Services.carry_on`` starts); no
upward call; 112 file visits. Before: 32 files measured this way (128 visits),
34 the old way, which also counted the loops the commit woke.
"""

from __future__ import annotations

import asyncio
import contextvars
import dis
import sys
import tempfile
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from bot import ids
from store import runs
from tests.bot import harness

ROOT = Path(__file__).resolve().parent.parent
#: Layers, outermost first: a call from a later one to an earlier one goes upward.
LAYERS = ("bot", "resume", "store")
#: The tool whose call ends the trace: the quotes app's ``send_quote``.
TOOL_FILE, TOOL_FUNCTION = "examples/quotes.py", "send"
#: aiohttp runs each request in a task of its own, started in this coroutine.
REQUEST_FILE, REQUEST_FUNCTION = "aiohttp/web_protocol.py", "_handle_request"

#: Set in the click's request task; inherited by every task it spawns.
IN_CLICK: contextvars.ContextVar[bool] = contextvars.ContextVar("in_click", default=False)

_first_resume: dict[CodeType, int] = {}


def _repo_file(filename: str) -> str | None:
    """``bot/x.py`` for a file of one of the layers (the stand-in excluded), else None."""
    try:
        relative = Path(filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    if relative.startswith("bot/sandbox/") or relative.split("/")[0] not in LAYERS:
        return None
    return relative


def _fresh(frame: FrameType) -> bool:
    """True for a call, False for a coroutine or generator resuming."""
    code = frame.f_code
    if code not in _first_resume:
        _first_resume[code] = next(
            (i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
    return frame.f_lasti <= _first_resume[code]


def _layer(path: str) -> str:
    return path.split("/")[0]


def _is_click_request(frame: FrameType) -> bool:
    code = frame.f_code
    if code.co_name != REQUEST_FUNCTION or not code.co_filename.endswith(REQUEST_FILE):
        return False
    request = frame.f_locals.get("request")
    return getattr(request, "method", "") == "POST" and \
        getattr(request, "path", "") == ids.EVENTS_PATH


class Trace:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.functions: dict[str, list[str]] = {}
        self.transitions: list[tuple[str, str]] = []
        self.upward: dict[tuple[str, str], int] = {}
        #: How often the path entered each file from another one (1: visited once).
        self.visits: dict[str, int] = {}
        self._last: str | None = None
        self.tool_ran = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.tool_ran or event != "call":
            return
        if _is_click_request(frame):
            IN_CLICK.set(True)  # the profiler runs in the task's own context
            return
        if not IN_CLICK.get():
            return
        code = frame.f_code
        if code.co_filename.endswith(TOOL_FILE) and code.co_name == TOOL_FUNCTION:
            self.tool_ran = True
            return
        path = _repo_file(code.co_filename)
        if path is None or not _fresh(frame):
            return
        if path not in self.order:
            self.order.append(path)
        if path != self._last:
            self.visits[path] = self.visits.get(path, 0) + 1
            self._last = path
        names = self.functions.setdefault(path, [])
        if code.co_name not in names:
            names.append(code.co_name)
        caller_path = _caller(frame)
        if caller_path is None or _layer(caller_path) == _layer(path):
            return
        step = (_layer(caller_path), _layer(path))
        if not self.transitions or self.transitions[-1] != step:
            self.transitions.append(step)
        if LAYERS.index(step[0]) > LAYERS.index(step[1]):
            key = (f"{caller_path} {_caller_name(frame)}", f"{path} {code.co_name}")
            self.upward[key] = self.upward.get(key, 0) + 1


def _caller_frame(frame: FrameType) -> FrameType | None:
    caller = frame.f_back
    while caller is not None and _repo_file(caller.f_code.co_filename) is None:
        caller = caller.f_back
    return caller


def _caller(frame: FrameType) -> str | None:
    caller = _caller_frame(frame)
    return _repo_file(caller.f_code.co_filename) if caller is not None else None


def _caller_name(frame: FrameType) -> str:
    caller = _caller_frame(frame)
    return caller.f_code.co_name if caller is not None else "?"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with harness.bot_world(f"sqlite+aiosqlite:///{tmp}/signoff.db") as world:
            await world.command(harness.REP, f"ask {harness.ASK}")
            await world.deliver()
            [run] = await runs.list_runs(world.db, limit=1)
            body = world.click_body(harness.REP, ids.APPROVE_ACTION, run.pending_token or "")
            trace = Trace()
            sys.setprofile(trace)
            try:
                await world.post(body)
                await world.settle()
            finally:
                sys.setprofile(None)
    if not trace.tool_ran:
        raise SystemExit("the tool never ran in the click's context: nothing measured")
    report(trace)


def report(trace: Trace) -> None:
    for n, path in enumerate(trace.order, 1):
        print(f"{n:3} {path:32} {', '.join(trace.functions[path])}")
    counts = {layer: sum(_layer(p) == layer for p in trace.order) for layer in LAYERS}
    print(f"files: {len(trace.order)} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    again = sorted(((n, p) for p, n in trace.visits.items() if n > 1), reverse=True)
    print(f"file visits: {sum(trace.visits.values())}; entered more than once:",
          ", ".join(f"{p} {n}" for n, p in again) or "none")
    print(f"layer transitions ({len(trace.transitions)}):",
          " ".join(f"{a}>{b}" for a, b in trace.transitions))
    print("upward calls:", "none" if not trace.upward else "")
    for (caller, callee), times in sorted(trace.upward.items()):
        print(f"    {caller} -> {callee}: {times}")


if __name__ == "__main__":
    asyncio.run(main())
