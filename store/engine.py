"""Engines and transactions for SQLite (embedded default) and PostgreSQL (replicas).

SQLite: WAL, ``synchronous=FULL``, a busy timeout and foreign keys; the
driver's own transaction handling is turned off and every write transaction
is ``BEGIN IMMEDIATE``, because a deferred read-then-write gets SQLITE_BUSY
without waiting for the lock. PostgreSQL: asyncpg, READ COMMITTED, pre-ping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from store import errors

DEFAULT_URL = "sqlite+aiosqlite:///./signoff.db"
#: How long a SQLite writer waits for the lock before giving up.
SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE = "signoff_write"
#: ``conn.info`` key of the callbacks a write transaction runs once it has committed.
AFTER_COMMIT = "signoff_after_commit"


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
            hooks: list[Any] = []
            conn.info[AFTER_COMMIT] = hooks
            try:
                async with conn.begin():
                    yield conn
            except BaseException:
                # Rolled back: nothing to tell. The connection is not touched here: after a
                # cancellation it may be unusable, and touching it would turn the
                # CancelledError into a MissingGreenlet that a caller's loop then swallows.
                hooks.clear()
                raise
            conn.info.pop(AFTER_COMMIT, None)
            # Committed: now tell this process's waiters (see store.call_watch).
            for hook in hooks:
                hook()

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
        if (advice := _NOT_SET_UP.get(_sqlstate(exc))) is not None:
            raise errors.DatabaseMissing(f"{_first_line(exc.orig)}: {advice}") from exc
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


#: SQLSTATEs of a server that answers but has no such database or role for us, and
#: what an operator does about each.
_NOT_SET_UP = {
    "3D000": "create it (createdb NAME) or point DATABASE_URL at a database that exists",
    "28000": "create the role (createuser NAME) or fix the user in DATABASE_URL",
    "28P01": "check the user and password in DATABASE_URL",
}


def _sqlstate(exc: DBAPIError) -> str:
    return str(getattr(exc.orig, "sqlstate", None) or "")


def _first_line(error: BaseException | None) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else repr(error)


def _server_unavailable(exc: DBAPIError) -> bool:
    state = _sqlstate(exc)
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
            url, isolation_level="READ COMMITTED", pool_pre_ping=True,
            pool_reset_on_return=None, **engine_kwargs
        )
        return Database(engine)
    raise errors.StoreError(
        f"unsupported DATABASE_URL {parsed.render_as_string(hide_password=True)!r}: "
        "use sqlite+aiosqlite:///path.db or postgresql+asyncpg://user@host/db"
    )


def _sqlite_engine(url: str, **engine_kwargs: Any) -> AsyncEngine:
    engine = create_async_engine(url, pool_reset_on_return=None, **engine_kwargs)

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
