"""Engines and transactions for SQLite (embedded default) and PostgreSQL (replicas).

SQLite: WAL, ``synchronous=FULL``, a busy timeout and foreign keys; the
driver's own transaction handling is turned off and every write transaction
is ``BEGIN IMMEDIATE``, because a deferred read-then-write gets SQLITE_BUSY
without waiting for the lock. Statements go to aiosqlite's thread in one
hand-off each (``store.sqlite_driver``). PostgreSQL: asyncpg, READ COMMITTED;
a pooled connection the server has closed (a restart, an admin shutdown) is
replaced at checkout, without a round trip (see ``_stale_on_checkout``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from store import errors, sqlite_driver

DEFAULT_URL = "sqlite+aiosqlite:///./signoff.db"
#: How long a SQLite writer waits for the lock before giving up.
SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE = "signoff_write"


class Database:
    """One engine plus the two kinds of transaction signoff uses.

    ``write()`` takes the write lock up front on SQLite (``BEGIN IMMEDIATE``),
    so concurrent writers queue instead of failing; on PostgreSQL it is an
    ordinary READ COMMITTED transaction whose guarded UPDATEs decide races.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with _translated(), self.engine.connect() as conn:
            conn = await conn.execution_options(**{_WRITE: True})
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with _translated(), self.engine.connect() as conn, conn.begin():
            yield conn

    async def ping(self) -> None:
        """Raise DatabaseUnavailable unless a trivial query succeeds."""
        async with self.read() as conn:
            await conn.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        await self.engine.dispose()


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        raise errors.DatabaseUnavailable(f"database unavailable: {exc.orig!r}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated or _server_unavailable(exc):
            raise errors.DatabaseUnavailable(f"database connection lost: {exc.orig!r}") from exc
        raise
    except OSError as exc:
        raise errors.DatabaseUnavailable(f"database unreachable: {exc}") from exc


#: SQLSTATEs of a server that is not there right now: class 08 (connection exception),
#: 57P01/57P02 (admin or crash shutdown), 57P03 (cannot connect now: starting up or
#: shutting down). asyncpg reports a restart in progress with these, and SQLAlchemy
#: surfaces them as a plain DBAPIError, not an OperationalError.
_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03"})


def _server_unavailable(exc: DBAPIError) -> bool:
    state = str(getattr(exc.orig, "sqlstate", None) or "")
    return state.startswith("08") or state in _UNAVAILABLE_STATES


def connect(url: str = DEFAULT_URL, **engine_kwargs: Any) -> Database:
    """Build a Database for ``url`` (``sqlite+aiosqlite://`` or ``postgresql+asyncpg://``).

    Pooled connections are not rolled back on return: every transaction here
    ends in COMMIT or ROLLBACK through ``write()``/``read()``, and the extra
    round trip (a thread hop on aiosqlite) was a measurable part of a claim.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return Database(_sqlite_engine(url, **engine_kwargs))
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            url = str(parsed.set(drivername="postgresql+asyncpg"))
        engine = create_async_engine(
            url, isolation_level="READ COMMITTED", pool_reset_on_return=None, **engine_kwargs
        )
        event.listen(engine.sync_engine.pool, "checkout", _stale_on_checkout)
        return Database(engine)
    raise errors.StoreError(
        f"unsupported DATABASE_URL {parsed.render_as_string(hide_password=True)!r}: "
        "use sqlite+aiosqlite:///path.db or postgresql+asyncpg://user@host/db"
    )


def _stale_on_checkout(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """Replace a pooled asyncpg connection the server has already closed.

    When PostgreSQL restarts or terminates a backend it tells the client and
    closes the socket; asyncpg marks the connection closed as soon as the event
    loop reads that, so ``is_closed()`` answers without a round trip. Raising
    DisconnectionError makes the pool discard it and connect afresh (SQLAlchemy's
    documented pessimistic-disconnect hook). This replaces ``pool_pre_ping``,
    whose ping on asyncpg is three round trips (BEGIN, ``;``, ROLLBACK) before
    every transaction. A connection that dies between checkout and its first
    statement fails that statement (DatabaseUnavailable) and the failure
    invalidates every connection pooled before it, so the next transaction
    reconnects: the same outcome pre-ping gave for a death after its ping.
    """
    driver = getattr(dbapi_conn, "driver_connection", None)
    if driver is not None and driver.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


def _sqlite_engine(url: str, **engine_kwargs: Any) -> AsyncEngine:
    engine = create_async_engine(
        url, pool_reset_on_return=None, module=sqlite_driver.Dbapi.load(), **engine_kwargs
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Turn off the driver's implicit BEGIN so ours (below) is the only one.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
