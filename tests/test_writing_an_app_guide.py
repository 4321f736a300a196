"""docs/writing-an-app.md works as written: its code blocks, extracted and run.

Each ```python <file> block is appended to <file> in a fresh folder, in the order
the guide gives them; the guide's own pytest file then runs there, in a
subprocess, as a reader would run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "writing-an-app.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _files() -> dict[str, str]:
    files: dict[str, str] = {}
    for language, name, body in BLOCK.findall(GUIDE.read_text(encoding="utf-8")):
        if language != "python":
            continue
        assert name.strip(), f"a python block without a file name: {body[:80]!r}"
        files[name.strip()] = files.get(name.strip(), "") + body + "\n\n"
    return files


def test_guide__is_linked_from_the_readme() -> None:
    assert "(docs/writing-an-app.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def test_guide__its_code_blocks_run_and_its_tests_pass(tmp_path: Path) -> None:
    files = _files()
    assert set(files) == {"myapp.py", "test_myapp.py"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "SIGNOFF_", "SLACK_", "DATABASE_URL"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_myapp.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout


def test_guide__the_app_loads_as_the_sandbox_names_it(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(_files()["myapp.py"], encoding="utf-8")
    assert "signoff sandbox --app myapp:app" in GUIDE.read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", "import resume; app = resume.load('myapp:app'); "
         "print(app.name, [t.name for t in app.tools], app.examples)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "refunds ['find_order', 'refund_order']" in done.stdout
