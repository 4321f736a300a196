"""aiosqlite under SQLAlchemy with one thread hand-off per statement.

aiosqlite runs each connection's sqlite3 calls on its own thread; every call
is a hand-off to that thread and back. SQLAlchemy's stock adapter makes four
per statement (create the cursor, execute, fetch, close), so a claim's six
statements cost ~26 context switches, and on a busy machine the switches, not
SQLite, were the cost of a claim. This cursor sends each statement to the
thread as one call (execute, read the description, fetch every row, close)
and answers from what came back. ``BEGIN IMMEDIATE`` and ``COMMIT`` are one
hand-off each, so a claim is one per statement plus two.

Server-side (streaming) cursors keep SQLAlchemy's own implementation.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_dbapi,
)

try:
    from sqlalchemy.util import await_
except ImportError:  # SQLAlchemy 2.0 names it await_only
    from sqlalchemy.util import await_only as await_

#: What one statement leaves behind: description, rows, rowcount, lastrowid.
_Outcome = tuple[Any, list[Any], int, int | None]


def _run(conn: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> _Outcome:
    """Runs on the connection's thread: the whole statement, start to finish."""
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class _Cursor:
    """A DBAPI cursor over an aiosqlite connection, one thread hand-off per execute."""

    server_side = False

    def __init__(self, adapted: _Connection) -> None:
        self._adapted = adapted
        self._rows: deque[Any] = deque()
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def _execute(self, operation: str, parameters: Any, many: bool) -> None:
        aio = self._adapted._connection
        async with self._adapted._execute_mutex:
            # aiosqlite's queue to its thread: one call, one hand-off (its ``execute``
            # helpers would leave the fetch and the close as further hand-offs).
            outcome: _Outcome = await aio._execute(_run, aio._conn, operation, parameters, many)
        self.description, rows, self.rowcount, self.lastrowid = outcome
        self._rows = deque(rows)

    def execute(self, operation: str, parameters: Any = None) -> None:
        try:
            await_(self._execute(operation, parameters, False))
        except Exception as error:
            self._adapted._handle_exception(error)

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> None:
        try:
            await_(self._execute(operation, seq_of_parameters, True))
        except Exception as error:
            self._adapted._handle_exception(error)

    async def _async_soft_close(self) -> None:
        """Nothing to close: the sqlite3 cursor was closed on the thread."""

    def close(self) -> None:
        self._rows.clear()

    def setinputsizes(self, *sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def nextset(self) -> None:
        return None

    def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        n = min(self.arraysize if size is None else size, len(self._rows))
        return [self._rows.popleft() for _ in range(n)]

    def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    def __iter__(self) -> Iterator[Any]:
        while self._rows:
            yield self._rows.popleft()

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Connection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()

    def cursor(self, server_side: bool = False) -> Any:
        if server_side:
            return super().cursor(server_side=True)
        return _Cursor(self)


class Dbapi(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite DBAPI, handing out connections with the one-hop cursor.

    Pass as ``create_async_engine(url, module=Dbapi.load())``.
    """

    def connect(self, *arg: Any, **kw: Any) -> _Connection:
        stock = super().connect(*arg, **kw)
        return _Connection(self, stock._connection)

    @classmethod
    def load(cls) -> Dbapi:
        import aiosqlite

        return cls(aiosqlite, sqlite3)
