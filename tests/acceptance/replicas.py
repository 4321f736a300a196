"""Several real `signoff serve` processes on one PostgreSQL database, against one stand-in Slack.

``Cluster`` owns the pieces a multi-replica scenario needs:

- the Slack stand-in (``FakeSlack``) on 127.0.0.1 in the test's own event loop,
  so a test injects failures (``outage``, ``fail_next``) and reads what Slack
  was asked to show directly;
- ``signoff serve`` replicas, each ``python -m bot serve`` as its own process
  on its own port, with short TTL, orphan timeout and scheduler ticks set by
  environment; started and awaited on ``/readyz`` (plus one signed
  ``/signoff help`` so Bolt's one-off ``auth.test`` is behind it), stopped with
  SIGTERM (``stop``: must exit 0) or SIGKILL (``kill``);
- signed Slack requests (``ask``, ``click``) sent to a chosen replica;
- ``World``: the database as it stands, read with plain SQL over a fresh
  asyncpg connection each time (so a PostgreSQL restart cannot break the reader).

Replica output goes to one log file each (never a pipe: a full pipe would
block the server); ``Cluster.logs()`` returns the tails for failure messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import aiohttp
import asyncpg
from sqlalchemy.engine import make_url

from bot import ids
from bot.sandbox import FakeSlack, fake_slack, signing

REPO = Path(__file__).resolve().parents[2]
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test"
APPROVALS = "C0APPROVALS"
COMMAND_CHANNEL = "C0GENERAL"
QUOTES_APP = "examples.quotes:app"
SLOW_APP = "tests.acceptance.quotes_variants:slow"

#: Short timings for every replica (the README's variables; decimals allowed).
ORPHAN_AFTER_SECONDS = 3.0
REAPER_INTERVAL_SECONDS = 1.0
OUTBOX_INTERVAL_SECONDS = 0.2
EXPIRY_INTERVAL_SECONDS = 1.0
SUSPENSION_TTL_MINUTES = 10.0  # long enough that no scenario's card expires under it
START_TIMEOUT = 45.0

# Variables of the caller's that would point a replica somewhere else.
_FOREIGN = ("SLACK_", "SIGNOFF_", "DATABASE_URL", "PORT", "ACCEPTANCE_")

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def question(n: int) -> str:
    """A question the quotes example's scripted agent understands; quantities differ per run."""
    return f"draft a quote for Henderson, {n + 1} of SKU-4411"


def user(n: int) -> str:
    """One requester per run, so each person's ephemerals can be counted."""
    return f"U0REP{n:04d}"


async def until(
    check: Callable[[], Awaitable[T | None]], *, timeout: float, what: str, every: float = 0.2
) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``.

    A check answers None for "not yet"; the truthy answer it ends with is never None.
    """
    deadline = time.monotonic() + timeout
    last = await check()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} "
                                 f"(last: {last!r})")
        await asyncio.sleep(every)
        last = await check()
    return last


# --- Replicas --------------------------------------------------------------------------


@dataclass
class Replica:
    """One `signoff serve` process."""

    name: str
    port: int
    app: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no cleanup, exactly like a power cut."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    async def stop(self, timeout: float = 40.0) -> int:
        """SIGTERM, then wait for the graceful stop; the exit code."""
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.alive:
            self.proc.kill()
            self.proc.wait(10)
            self._log.close()
            raise AssertionError(f"{self.name} did not stop within {timeout:g}s of SIGTERM")
        self._log.close()
        return int(self.proc.returncode)

    def tail(self, lines: int = 40) -> str:
        """The end of the process's output, without the scheduler's per-tick chatter."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if " INFO apscheduler." not in line]
        return "\n".join(kept[-lines:])


@dataclass
class Cluster:
    fake: FakeSlack
    db_url: str
    tmp: Path
    http: aiohttp.ClientSession
    replicas: list[Replica] = field(default_factory=list)
    _started: int = 0

    # -- processes ---------------------------------------------------------------------

    def env(self, port: int, app: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN)}
        env.update({
            "PYTHONUNBUFFERED": "1",
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.fake.api_url,
            "DATABASE_URL": self.db_url,
            "PORT": str(port),
            "SIGNOFF_HOST": "127.0.0.1",
            "SIGNOFF_APP": app,
            "SIGNOFF_APPROVALS_CHANNEL": APPROVALS,
            "SIGNOFF_SUSPENSION_TTL_MINUTES": str(SUSPENSION_TTL_MINUTES),
            "SIGNOFF_ORPHAN_AFTER_SECONDS": str(ORPHAN_AFTER_SECONDS),
            "SIGNOFF_REAPER_INTERVAL_SECONDS": str(REAPER_INTERVAL_SECONDS),
            "SIGNOFF_OUTBOX_INTERVAL_SECONDS": str(OUTBOX_INTERVAL_SECONDS),
            "SIGNOFF_EXPIRY_INTERVAL_SECONDS": str(EXPIRY_INTERVAL_SECONDS),
        })
        env.update(extra or {})
        return env

    def spawn(self, app: str = QUOTES_APP, **extra: str) -> Replica:
        """Start one `signoff serve` (not yet ready: see :meth:`ready`)."""
        self._started += 1
        name = f"replica{self._started}"
        port = free_port()
        log_path = self.tmp / f"{name}.log"
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"], cwd=REPO, env=self.env(port, app, extra),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        replica = Replica(name, port, app, proc, log_path, log)
        self.replicas.append(replica)
        return replica

    async def ready(self, replica: Replica) -> None:
        """/readyz answers 200 and one signed `/signoff help` went through Bolt."""

        async def answered() -> bool:
            if not replica.alive:
                raise AssertionError(f"{replica.name} exited with {replica.proc.returncode}:\n"
                                     f"{replica.tail()}")
            try:
                async with self.http.get(replica.url + ids.READY_PATH) as response:
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        await until(answered, timeout=START_TIMEOUT, what=f"{replica.name} /readyz")
        status, text = await self.command(replica, "U0WARMUP", "help")
        assert status == 200 and "/signoff" in text, (status, text, replica.tail())

    async def start(self, count: int = 1, app: str = QUOTES_APP, **extra: str) -> list[Replica]:
        """Start ``count`` replicas at once and wait until every one is ready."""
        started = [self.spawn(app, **extra) for _ in range(count)]
        await asyncio.gather(*(self.ready(r) for r in started))
        return started

    @property
    def live(self) -> list[Replica]:
        return [r for r in self.replicas if r.alive]

    def logs(self) -> str:
        return "\n".join(f"--- {r.name} ({r.app}) ---\n{r.tail()}" for r in self.replicas)

    async def stop_all(self) -> dict[str, int]:
        """SIGTERM every live replica at once; name -> exit code."""
        live = self.live
        codes = await asyncio.gather(*(r.stop() for r in live))
        return {r.name: code for r, code in zip(live, codes, strict=True)}

    # -- Slack requests ----------------------------------------------------------------

    async def post(self, replica: Replica, body: str) -> tuple[int, str]:
        headers = signing.signed_headers(SECRET, body)
        async with self.http.post(replica.url + ids.EVENTS_PATH, data=body.encode(),
                                  headers=headers) as response:
            return response.status, await response.text()

    async def command(self, replica: Replica, who: str, text: str) -> tuple[int, str]:
        response_url = self.fake.response_url(COMMAND_CHANNEL, user=who)
        body = signing.slash_command_body(who, text, COMMAND_CHANNEL, response_url,
                                          signing.new_trigger_id())
        return await self.post(replica, body)

    async def ask(self, replica: Replica, n: int) -> int:
        """`/signoff ask` for run number ``n`` (its own requester); the HTTP status."""
        status, _ = await self.command(replica, user(n), f"ask {question(n)}")
        return status

    async def click(self, replica: Replica, card: Card, action: str = ids.APPROVE_ACTION) -> int:
        """A button click on ``card`` by its requester, with its own response_url."""
        response_url = self.fake.response_url(card.channel, message_ts=card.ts, user=card.user)
        body = signing.block_actions_body(
            card.user, action, card.token, card.channel, card.ts, response_url,
            signing.new_trigger_id(),
        )
        status, _ = await self.post(replica, body)
        return status

    # -- what the stand-in Slack shows --------------------------------------------------

    def message(self, card: Card) -> fake_slack.Message | None:
        return next((m for m in self.fake.messages(card.channel) if m.ts == card.ts), None)

    def card_posts(self) -> Counter[str]:
        """Token -> how many successful chat.postMessage calls carried its Approve button."""
        posts: Counter[str] = Counter()
        for call in self.fake.calls("chat.postMessage"):
            if call.status == 200 and call.error is None:
                posts.update(button_tokens(call.body.get("blocks")))
        return posts

    def ephemerals_containing(self, who: str, text: str) -> list[fake_slack.Ephemeral]:
        return [e for e in self.fake.ephemerals(who) if text in e.text]


def has_buttons(message: fake_slack.Message) -> bool:
    return any(b.get("block_id") == ids.ACTIONS_BLOCK for b in message.blocks)


def button_tokens(blocks: Any) -> list[str]:
    """The pending tokens on the Approve buttons of ``blocks`` (a list, or its JSON)."""
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    found = []
    for block in blocks or []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == ids.APPROVE_ACTION:
                found.append(str(element.get("value")))
    return found


@asynccontextmanager
async def cluster(db_url: str, tmp: Path) -> AsyncIterator[Cluster]:
    """A stand-in Slack and an empty set of replicas; every replica still up is SIGKILLed after."""
    async with FakeSlack() as fake, aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=30)
    ) as http:
        c = Cluster(fake, db_url, tmp, http)
        try:
            yield c
        finally:
            for replica in c.live:
                replica.kill()


# --- The database as it stands ------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    """An approval card as recorded in the store: where it was posted, and for whom."""

    token: str
    run_id: str
    user: str
    channel: str
    ts: str


class World:
    """Plain-SQL reads of the shared database (signoff's tables and the example CRM's)."""

    def __init__(self, db_url: str) -> None:
        self.dsn = make_url(db_url).set(drivername="postgresql").render_as_string(
            hide_password=False)

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def states(self) -> Counter[str]:
        return Counter({r["state"]: r["n"] for r in await self.fetch(
            "SELECT state, count(*) AS n FROM runs GROUP BY state")})

    async def runs(self) -> dict[str, asyncpg.Record]:
        return {r["id"]: r for r in await self.fetch("SELECT * FROM runs")}

    async def open_cards(self) -> list[Card]:
        """Undecided approval cards already posted to Slack, of runs still suspended on them."""
        rows = await self.fetch(
            "SELECT a.token, a.run_id, r.user_id, a.slack_channel, a.slack_ts "
            "FROM approvals a JOIN runs r ON r.id = a.run_id "
            "WHERE a.decision IS NULL AND a.slack_ts IS NOT NULL "
            "AND r.state = 'suspended' AND r.pending_token = a.token ORDER BY r.user_id")
        return [Card(r["token"], r["run_id"], r["user_id"], r["slack_channel"], r["slack_ts"])
                for r in rows]

    async def sends(self) -> list[asyncpg.Record]:
        """send_quote ledger rows: run_id, status, idempotency_key."""
        return await self.fetch(
            "SELECT run_id, status, idempotency_key FROM tool_calls WHERE tool = 'send_quote'")

    async def sent_quotes(self) -> list[asyncpg.Record]:
        return await self.fetch("SELECT id, send_key FROM crm_quotes WHERE status = 'sent'")

    async def outbox(self) -> Counter[str]:
        return Counter({r["state"]: r["n"] for r in await self.fetch(
            "SELECT state, count(*) AS n FROM outbox GROUP BY state")})

    async def outbox_rows(self) -> list[asyncpg.Record]:
        return await self.fetch("SELECT id, kind, run_id, state, attempts, last_error, payload "
                                "FROM outbox ORDER BY id")

    async def events(self, kind: str) -> list[asyncpg.Record]:
        return await self.fetch(
            "SELECT run_id, seq, data, at FROM run_events WHERE kind = $1 ORDER BY run_id, seq",
            kind)

    async def outbox_settled(self) -> bool:
        """Every outbox row sent (none pending, none dead)."""
        counts = await self.outbox()
        return bool(counts) and set(counts) == {"sent"}


def event_data(row: asyncpg.Record) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(row["data"])
    return data


# --- PostgreSQL itself -------------------------------------------------------------------


async def restart_postgres(command: list[str], db_url: str, *, timeout: float = 60.0) -> float:
    """Restart PostgreSQL and wait until it accepts connections again; seconds it was away."""
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, f"{' '.join(command)} failed: {out.decode(errors='replace')}"
    world = World(db_url)

    async def accepting() -> bool:
        try:
            await world.fetch("SELECT 1")
        except (OSError, asyncpg.PostgresError, TimeoutError):
            return False
        return True

    await until(accepting, timeout=timeout, what="PostgreSQL to accept connections again")
    return time.monotonic() - began
