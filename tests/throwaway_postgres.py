"""A PostgreSQL server of the test's own: initdb in a temp directory, on a free port.

For scenarios that stop or restart the server. The machine's shared cluster is
never stopped, restarted or reconfigured by a test: other people's work and
other test runs use it. This one is started from the installed server binaries
(``SIGNOFF_TEST_PG_BIN``, default the newest ``/usr/lib/postgresql/*/bin``),
listens on 127.0.0.1 only, trusts local connections, and is removed on the way
out. PostgreSQL refuses to run as root, so under root it runs as the
``postgres`` OS user, in a directory that user owns.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RUN_AS = "postgres"
START_TIMEOUT_S = 60


def server_bin() -> Path | None:
    """Where initdb and pg_ctl are, or None when no PostgreSQL server is installed."""
    given = os.environ.get("SIGNOFF_TEST_PG_BIN")
    candidates = [Path(given)] if given else sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
        if p.parent.name.isdigit() else 0, reverse=True)
    for found in candidates:
        if (found / "initdb").exists() and (found / "pg_ctl").exists():
            return found
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Throwaway:
    """A running throwaway server: its data directory, port, and how to restart it."""

    bin: Path
    data: Path
    port: int

    @property
    def admin_url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _as_owner(self, *command: str | Path) -> list[str]:
        prefix = ["runuser", "-u", RUN_AS, "--"] if os.geteuid() == 0 else []
        return [*prefix, *map(str, command)]

    @property
    def restart_command(self) -> list[str]:
        """Stop (fast) and start again with the same options, waiting for both."""
        # -l again: pg_ctl keeps the server's options, not where its output goes, and a
        # server writing to our pipe would keep it open for good.
        return self._as_owner(self.bin / "pg_ctl", "-D", self.data, "-l", self.log, "-m",
                              "fast", "-w", "-t", str(START_TIMEOUT_S), "restart")

    @property
    def log(self) -> Path:
        return self.data.parent / "server.log"

    def _run(self, *command: str | Path) -> None:
        done = subprocess.run(self._as_owner(*command), capture_output=True, text=True,
                              timeout=START_TIMEOUT_S + 30, check=False)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{done.stdout}"
                               f"{done.stderr}\n{tail}")

    def start(self) -> None:
        self._run(self.bin / "initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                  "--no-sync", "-E", "UTF8")
        options = (f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=200")
        self._run(self.bin / "pg_ctl", "-D", self.data, "-o", options, "-l", self.log,
                  "-w", "-t", str(START_TIMEOUT_S), "start")

    def stop(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")


@contextmanager
def throwaway(bin_dir: Path) -> Iterator[Throwaway]:
    """Start a new server, yield it, then stop it and delete its directory."""
    root = Path(tempfile.mkdtemp(prefix="signoff-pg-"))
    data = root / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, RUN_AS)
        shutil.chown(data, RUN_AS)
    server = Throwaway(bin_dir, data, _free_port())
    try:
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
