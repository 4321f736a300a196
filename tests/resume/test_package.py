"""The package face: an app author imports everything from ``resume`` itself."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import resume

REPO = Path(__file__).resolve().parents[2]
#: What the README and the examples promise an app author can import from ``resume``.
PROMISED = {
    "App", "Tool", "Preview", "Guard", "Reconciliation", "ToolContext", "Scope", "Limits",
    "Approvers", "Router", "Branch", "RouteDecision", "ScriptedModel",
    "OpenAICompatibleModel", "Message", "ToolCall", "ToolSpec", "Model", "call",
    "did_not_finish", "result_of", "Database", "connect",
}
#: examples/models.py reads SIGNOFF_MODEL_* through the bot's settings, so the variables
#: mean what `signoff serve --help` says; nothing else in examples/ reaches past ``resume``.
ALLOWED_ELSEWHERE = {("models.py", "bot")}


def test_package__exports_what_an_app_author_needs() -> None:
    assert PROMISED <= set(resume.__all__)
    for name in resume.__all__:
        assert getattr(resume, name) is not None, name


def test_package__every_export_is_the_object_its_module_defines() -> None:
    assert resume.App is importlib.import_module("resume.apps").App
    assert resume.call is importlib.import_module("resume.scripted").call


def test_examples__import_only_from_resume_and_each_other() -> None:
    strays: list[str] = []
    for path in sorted((REPO / "examples").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top = node.module.split(".")[0]
            elif isinstance(node, ast.Import):
                top = node.names[0].name.split(".")[0]
            else:
                continue
            if top in ("store", "bot") and (path.name, top) not in ALLOWED_ELSEWHERE:
                strays.append(f"{path.name}: {top}")
            if top == "resume" and isinstance(node, ast.ImportFrom) and node.module != "resume":
                strays.append(f"{path.name}: {node.module}")
    assert strays == []
