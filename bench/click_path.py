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

The path is what a reader follows: the files with a frame on the stack at each
thing the click does. Those things are the framework handing control to signoff
(aiohttp's middleware, Bolt's middleware and listener, the spawned drive), each
transaction signoff opens (to read or to write), each call into the app (its
scope, preview and guard), and the tool's call. Every other file the click
enters is consulted on the way: called, and returned from, without leading to
any of those. These are the codecs, the clock, the message model, a budget
check, and the builder of an outbox payload. The bench prints the stacks, then
the path with a per-layer count, and checks two things on every stack: no file
is there twice (a file entered again through other code, such as a framework
calling back, counts twice), and the layers run bot > resume > store. Then come the
consulted files with their functions, all files entered, how often each file
was entered again after leaving it, the layer transitions (repeats
collapsed), and every upward call (store -> resume, resume -> bot, store ->
bot: a hook or callback pointing the wrong way).

    python -m bench.click_path

Measured on the quotes example, SQLite: the path is 12 files (bot 3, resume 5,
store 4), each once on every stack, always downward; 8 more are consulted; 20
in all (bot 4, resume 10, store 6); no upward call; 110 file visits. Counting
each SQL statement instead of each transaction adds ``store/transitions.py``
(the guarded UPDATE that ``claims`` and ``runs`` build their writes with): 13.
Before this bench showed the path: 21 files entered in all (112 visits; one
fewer since only because ``bot/workspace.py`` became part of ``bot/services.py``),
32 before that, 34 the old way, which also counted the loops the commit woke.
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
#: Every transaction the store opens (to read or to write) begins here.
TRANSACTION_FILE, TRANSACTIONS = "store/engine.py", ("read", "write")

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
        #: What the click did, and the repo files on the stack then (outermost first).
        self.stacks: list[tuple[str, list[str]]] = []

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
            self.stacks.append(("the tool's call", _stack(frame.f_back)))
            return
        path = _repo_file(code.co_filename)
        if not _fresh(frame):
            return
        self._mark(frame, path)
        if path is not None:
            self._visit(frame, path)

    def _mark(self, frame: FrameType, path: str | None) -> None:
        """Record the stack when this call is one of the things the click does."""
        code, by_us = frame.f_code, frame.f_back is not None \
            and _repo_file(frame.f_back.f_code.co_filename) is not None
        if path is None and code.co_filename.startswith(str(ROOT / "examples")) and by_us:
            self.stacks.append((f"the app's {code.co_name}", _stack(frame.f_back)))
        elif path == TRANSACTION_FILE and code.co_name in TRANSACTIONS and _ours(frame):
            self.stacks.append((f"{code.co_name} from {_caller_name(frame)}", _stack(frame)))
        elif path is not None and _layer(path) == "bot" and not by_us:
            started = frame.f_back is None or "/asyncio/" in frame.f_back.f_code.co_filename
            how = "a task's start" if started else "called by the framework"
            self.stacks.append((f"{code.co_name}, {how}", _stack(frame)))

    def _visit(self, frame: FrameType, path: str) -> None:
        code = frame.f_code
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

def _ours(frame: FrameType) -> bool:
    """The transaction is opened by signoff's code, not by the app's (its own world's)."""
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename.endswith("contextlib.py"):
        caller = caller.f_back
    return caller is not None and _repo_file(caller.f_code.co_filename) is not None


def _stack(frame: FrameType | None) -> list[str]:
    """The repo files with a frame on the stack, outermost first. Calls within one file are
    one entry; a file entered again through other code (a framework calling back) is two."""
    files: list[str] = []
    previous: str | None = None
    while frame is not None:
        path = _repo_file(frame.f_code.co_filename)
        if path is not None and path != previous:
            files.append(path)
        previous = path
        frame = frame.f_back
    return files[::-1]


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


async def traced(database_url: str) -> Trace:
    """One signed Approve click on a fresh world on ``database_url``, traced."""
    async with harness.bot_world(database_url) as world:
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
    return trace


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = await traced(f"sqlite+aiosqlite:///{tmp}/signoff.db")
    if not trace.tool_ran:
        raise SystemExit("the tool never ran in the click's context: nothing measured")
    report(trace)


def twice(stack: list[str]) -> bool:
    """A file is on the stack twice (entered again through other code)."""
    return len(stack) != len(set(stack))


def downward(stack: list[str]) -> bool:
    """The stack's layers run bot > resume > store, never back."""
    layers = [LAYERS.index(_layer(p)) for p in stack]
    return layers == sorted(layers)


def report(trace: Trace) -> None:
    path = list(dict.fromkeys(p for _, stack in trace.stacks for p in stack))
    once = not any(twice(stack) for _, stack in trace.stacks)
    down = all(downward(stack) for _, stack in trace.stacks)
    print("The path: the files on the stack at each thing the click does")
    shown = list(dict.fromkeys((what, " > ".join(stack)) for what, stack in trace.stacks))
    for what, stack_text in shown:
        print(f"    {what:44} {stack_text}")
    print(f"path: {len(path)} files ({_per_layer(path)}): {', '.join(path)}")
    print(f"each file once on every stack: {'yes' if once else 'no'}; "
          f"every stack runs bot > resume > store: {'yes' if down else 'no'}")
    consulted = [p for p in trace.order if p not in path]
    print(f"consulted on the way (called, and returned): {len(consulted)} files")
    for p in consulted:
        print(f"    {p:32} {', '.join(trace.functions[p])}")
    print(f"files the click's code entered at all: {len(trace.order)} ({_per_layer(trace.order)})")
    again = sorted(((n, p) for p, n in trace.visits.items() if n > 1), reverse=True)
    print(f"file visits: {sum(trace.visits.values())}; entered more than once:",
          ", ".join(f"{p} {n}" for n, p in again) or "none")
    print(f"layer transitions ({len(trace.transitions)}):",
          " ".join(f"{a}>{b}" for a, b in trace.transitions))
    print("upward calls:", "none" if not trace.upward else "")
    for (caller, callee), times in sorted(trace.upward.items()):
        print(f"    {caller} -> {callee}: {times}")


def _per_layer(files: list[str]) -> str:
    return ", ".join(f"{layer} {sum(_layer(p) == layer for p in files)}" for layer in LAYERS)


if __name__ == "__main__":
    asyncio.run(main())
