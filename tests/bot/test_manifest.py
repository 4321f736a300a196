"""manifest.yml is a valid Slack manifest and agrees with bot/ids.py and with what bot/ calls."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from bot import ids

REPO = Path(__file__).parents[2]
SCHEMA_NAME = "manifest.schema.1.0.0.json"

#: `client.chat_postMessage(` / `self._client.views_open(` -> ("chat", "postMessage").
WEB_API_CALL = re.compile(r"\bclient\.([a-z]+)_([A-Za-z]+)\s*\(")


#: A copy of Slack's schema kept with the tests, so a clean clone validates on its own.
VENDORED = Path(__file__).parent / "data" / SCHEMA_NAME


def _shared_schema() -> Path | None:
    """The team's reference copy: $SIGNOFF_SHARED_DIR when set, else ../shared next to the repo."""
    candidates = [REPO.parent / "shared"]
    if shared := os.environ.get("SIGNOFF_SHARED_DIR"):
        candidates.insert(0, Path(shared))
    for shared_dir in candidates:
        path = shared_dir / "slack" / SCHEMA_NAME
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "manifest.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "manifest.yml must be a mapping"
    return loaded


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    loaded = json.loads(VENDORED.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_manifest__vendored_schema_is_the_shared_one() -> None:
    shared = _shared_schema()
    if shared is None:
        pytest.skip(f"no shared copy of {SCHEMA_NAME} next to the repo to compare with")
    assert json.loads(shared.read_text(encoding="utf-8")) == json.loads(
        VENDORED.read_text(encoding="utf-8")), "tests/bot/data holds an outdated Slack schema"


def _slash_command(manifest: dict[str, Any]) -> dict[str, Any]:
    commands = manifest["features"]["slash_commands"]
    matching = [c for c in commands if c["command"] == ids.COMMAND]
    assert len(matching) == 1, f"manifest.yml declares {ids.COMMAND} {len(matching)} times"
    command: dict[str, Any] = matching[0]
    return command


def test_manifest__is_valid_against_slacks_schema(
    manifest: dict[str, Any], schema: dict[str, Any]
) -> None:
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors
    )


def test_manifest__schema_rejects_a_broken_manifest(
    manifest: dict[str, Any], schema: dict[str, Any]
) -> None:
    broken = {**manifest, "features": {"slash_commands": [{"command": "signoff"}]}}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def test_manifest__is_http_mode(manifest: dict[str, Any]) -> None:
    assert manifest["settings"]["socket_mode_enabled"] is False
    assert manifest["features"]["bot_user"]["display_name"]


def test_manifest__slash_command_matches_ids(manifest: dict[str, Any]) -> None:
    command = _slash_command(manifest)
    # In HTTP mode a command without a url is accepted by the schema and never delivered.
    assert urlsplit(command["url"]).scheme == "https"
    assert urlsplit(command["url"]).path == ids.EVENTS_PATH
    assert command["usage_hint"] == ids.COMMAND_USAGE_HINT
    assert command["description"]
    for subcommand in ids.SUBCOMMANDS:
        assert subcommand in command["usage_hint"]


def test_manifest__interactivity_posts_to_the_events_path(manifest: dict[str, Any]) -> None:
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    url = urlsplit(interactivity["request_url"])
    assert url.scheme == "https"
    assert url.path == ids.EVENTS_PATH
    # One deployment serves both: the command and the buttons must reach the same host.
    assert url.netloc == urlsplit(_slash_command(manifest)["url"]).netloc


def test_manifest__requests_every_scope_the_bot_needs(manifest: dict[str, Any]) -> None:
    requested = set(manifest["oauth_config"]["scopes"]["bot"])
    missing = ids.required_bot_scopes() - requested
    assert not missing, f"manifest.yml lacks bot scopes {sorted(missing)}"


def _web_api_calls() -> dict[str, list[str]]:
    """Slack Web API methods called anywhere in bot/, with where each is called."""
    calls: dict[str, list[str]] = {}
    for path in sorted((REPO / "bot").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in WEB_API_CALL.finditer(text):
            method = f"{match.group(1)}.{match.group(2)}"
            line = text.count("\n", 0, match.start()) + 1
            calls.setdefault(method, []).append(f"{path.relative_to(REPO)}:{line}")
    return calls


def test_manifest__every_web_api_method_called_has_its_scope_listed() -> None:
    unknown = {m: where for m, where in _web_api_calls().items() if m not in ids.SCOPES_BY_METHOD}
    assert not unknown, (
        "bot/ calls Slack Web API methods missing from ids.SCOPES_BY_METHOD "
        f"(add each with its scope, and the scope to manifest.yml): {unknown}"
    )


def _id_values() -> dict[str, str]:
    return {
        value: name
        for name, value in vars(ids).items()
        if name.isupper() and isinstance(value, str) and name != "COMMAND_USAGE_HINT"
    }


def test_ids__are_spelled_only_in_bot_ids() -> None:
    # bot/sandbox/ plays Slack's part (like tests/), so it may spell the contract itself.
    exempt = {REPO / "bot" / "ids.py", REPO / "bot" / "sandbox"}
    id_values = _id_values()
    assert ids.APPROVE_ACTION in id_values and ids.EVENTS_PATH in id_values
    spelled: list[str] = []
    for package in ("bot", "resume", "store", "examples"):
        for path in sorted((REPO / package).rglob("*.py")):
            if exempt.intersection((path, *path.parents)):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            where = path.relative_to(REPO)
            spelled.extend(
                f"{where}:{node.lineno} {node.value!r} (use ids.{id_values[node.value]})"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value in id_values
            )
    assert not spelled, "Slack ids spelled outside bot/ids.py:\n" + "\n".join(spelled)


def test_procfile__declares_web_and_release() -> None:
    lines = (REPO / "Procfile").read_text(encoding="utf-8").splitlines()
    processes = dict(line.split(":", 1) for line in lines if line.strip())
    assert {k: v.strip() for k, v in processes.items()} == {
        "web": "signoff serve",
        "release": "signoff db upgrade",
    }


# --- manifest.socket.yml: the same app in Socket Mode ---------------------------------------


@pytest.fixture(scope="module")
def socket_manifest() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "manifest.socket.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "manifest.socket.yml must be a mapping"
    return loaded


def test_socket_manifest__is_valid_against_slacks_schema(
    socket_manifest: dict[str, Any], schema: dict[str, Any]
) -> None:
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(socket_manifest), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors
    )


def test_socket_manifest__is_socket_mode_with_no_public_url(
    socket_manifest: dict[str, Any],
) -> None:
    settings = socket_manifest["settings"]
    assert settings["socket_mode_enabled"] is True
    # Slack ignores request URLs in Socket Mode; one left here would suggest a public host.
    assert "request_url" not in settings["interactivity"]
    assert settings["interactivity"]["is_enabled"] is True
    assert "url" not in _slash_command(socket_manifest)
    assert "signoff.example.com" not in (REPO / "manifest.socket.yml").read_text()


def test_socket_manifest__is_the_http_app_in_all_else(
    manifest: dict[str, Any], socket_manifest: dict[str, Any]
) -> None:
    command = {k: v for k, v in _slash_command(manifest).items() if k != "url"}
    assert _slash_command(socket_manifest) == command
    assert socket_manifest["oauth_config"] == manifest["oauth_config"]
    assert socket_manifest["display_information"] == manifest["display_information"]
    assert socket_manifest["features"]["bot_user"] == manifest["features"]["bot_user"]
