"""Where an adapter keeps a paused agent's state while a person decides.

The state (a framework's message history or run state) is stored keyed by the signoff run,
so the agent's process may exit during the wait and any process resume it later.
``FilePauses`` keeps one file per run; give an adapter any object with the same three
methods to keep them in your own database.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class Pauses(Protocol):
    def save(self, run_id: str, state: bytes) -> None: ...

    def load(self, run_id: str) -> bytes | None: ...

    def clear(self, run_id: str) -> None: ...


class FilePauses:
    """One file per paused run under ``directory``, replaced atomically on each save."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{_SAFE.sub('_', run_id)}.json"

    def save(self, run_id: str, state: bytes) -> None:
        path = self._path(run_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(state)
        os.replace(tmp, path)

    def load(self, run_id: str) -> bytes | None:
        path = self._path(run_id)
        return path.read_bytes() if path.exists() else None

    def clear(self, run_id: str) -> None:
        self._path(run_id).unlink(missing_ok=True)
