"""`signoff mcp-gateway`'s flags: what it refuses before it serves anything (no `signoff
serve` needed, so these are apart from the tests that share one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance import replicas
from tests.client import harness
from tests.client.mcp_harness import gateway_argv
from tests.client.refunds import Payments


@pytest.mark.parametrize(("left_out", "said"), [
    ("--api-key", "error: --api-key (or SIGNOFF_API_KEY) is required"),
    ("--gate", "error: --gate GLOB is required: without it no tool would need approval"),
])
def test_gateway__without_a_required_flag_says_so_and_starts_nothing(
        tmp_path: Path, left_out: str, said: str) -> None:
    started = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    given = {"--gate": "*", "--api-key": "so_unused"}
    flags = [part for flag, value in given.items() if flag != left_out for part in (flag, value)]
    done = subprocess.run(
        [sys.executable, "-m", "bot", "mcp-gateway", "--upstream", f"touch {started}", *flags,
         "--url", "http://127.0.0.1:9", "--requester", harness.REQUESTER],
        cwd=replicas.REPO, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [said], done
    assert not started.exists()


def start_gateway(payments: Payments, *options: str) -> subprocess.CompletedProcess[str]:
    """The gateway started with ``options``, for flags it refuses before it serves anything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    argv = gateway_argv("http://127.0.0.1:9", "so_unused", payments, *options)
    return subprocess.run([sys.executable, *argv], cwd=replicas.REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("options", "said"), [
    (["--preview", "refund_*=preview_refnd"],
     "error: --preview refund_*=preview_refnd: the upstream server has no tool "
     "'preview_refnd' (it has: check_refund, lookup, preview_refund, refund_order)"),
    (["--guard", "refund_*=refund_order"],
     "error: --guard refund_*=refund_order: refund_order matches a --gate glob; a preview or "
     "guard tool only reads, and must not need approval itself"),
    (["--preview", "lookup*=preview_refund"],
     "error: --preview lookup*=preview_refund: no gated upstream tool matches 'lookup*' "
     "(gated: refund_order)"),
    # A typo'd glob next to a good one: the tool it meant would pass through unasked.
    (["--gate", "refnd_*"],
     "error: --gate refnd_*: matches no upstream tool (it has: check_refund, lookup, "
     "preview_refund, refund_order), so it would gate nothing"),
])
def test_flags__a_helper_or_glob_that_does_not_fit_the_upstream_is_refused_at_start(
        payments: Payments, options: list[str], said: str) -> None:
    done = start_gateway(payments, *options)

    assert done.returncode == 2, done
    assert (done.stdout, done.stderr.splitlines()) == ("", [said]), done


def test_flags__a_helper_without_its_tool_is_a_usage_error(payments: Payments) -> None:
    done = start_gateway(payments, "--preview", "refund_order")

    assert done.returncode == 2, done
    assert "expected GLOB=TOOL, e.g. 'refund_*=preview_refund', got 'refund_order'" in done.stderr
