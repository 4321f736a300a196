"""A TCP proxy in front of PostgreSQL that a test can cut and restore: a real outage.

Cutting aborts every open connection and refuses new ones (accepted, then
closed at once), which is what a client sees while a server restarts or a
network drops. Nothing is mocked: the driver, the pool and the server are real.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url


class Proxy:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(make_url(upstream_url).render_as_string(hide_password=False))
        self.url = upstream_url
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.down = False
        #: Connections refused or cut while down.
        self.refused = 0

    async def start(self) -> str:
        """Listen on a free port; the database URL that goes through the proxy."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return make_url(self.url).set(host="127.0.0.1", port=port).render_as_string(
            hide_password=False)

    def cut(self) -> None:
        self.down = True
        for writer in list(self._open):
            writer.transport.abort()
            self.refused += 1
        self._open.clear()

    def restore(self) -> None:
        self.down = False

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            self.refused += 1
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        pair = {writer, up_writer}
        self._open |= pair
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._open -= pair
            for w in pair:
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.transport.abort()


@contextlib.asynccontextmanager
async def proxied(url: str) -> AsyncIterator[tuple[Proxy, str]]:
    proxy = Proxy(url)
    through = await proxy.start()
    try:
        yield proxy, through
    finally:
        await proxy.close()
