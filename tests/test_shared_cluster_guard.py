"""No test manages the lifecycle of the machine's shared PostgreSQL cluster.

Other people's work and other test runs use that cluster; a scenario that
stops or restarts PostgreSQL starts its own (``tests.throwaway_postgres``).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
#: Debian's cluster wrapper and the service managers that drive it; spelled in pieces
#: so this file does not find itself.
FORBIDDEN = ("pg_" + "ctlcluster", "systemctl " + "restart postgresql",
             "service " + "postgresql")


def _code(line: str) -> str:
    """The part of a line before a ``#`` comment (good enough for these words)."""
    return line.split("#", 1)[0]


def test_no_test_restarts_or_stops_the_shared_cluster() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{n}: {line.strip()}"
        for path in sorted(TESTS.rglob("*"))
        if path.is_file() and path.suffix in (".py", ".sh", ".toml", ".cfg", ".ini", "")
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if any(word in _code(line) for word in FORBIDDEN)
    ]
    assert found == [], "tests must not touch the shared cluster's lifecycle:\n" + "\n".join(found)
