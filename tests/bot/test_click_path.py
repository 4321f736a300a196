"""The layering, measured on a real click: an Approve click's code only ever calls downward.

``bench/click_path.py`` traces one signed click through the real server until the quotes
app's ``send`` runs. Whatever the file count, these hold: the tool ran in the click's own
context, no call goes upward (store -> resume, resume -> bot), and at each thing the click
does (a framework hand-over, a transaction, a call into the app, the tool) the stack runs
bot > resume > store with no file on it twice.
"""

from __future__ import annotations

from pathlib import Path

from bench import click_path


async def test_click_path__an_approve_click_only_calls_downward(tmp_path: Path) -> None:
    trace = await click_path.traced(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}")

    assert trace.tool_ran, "the quotes app's send never ran in the click's context"
    assert trace.upward == {}
    assert [what for what, _ in trace.stacks].count("the tool's call") == 1
    backwards = [(what, stack) for what, stack in trace.stacks
                 if not click_path.downward(stack) or click_path.twice(stack)]
    assert backwards == []
    # The click reached the store through resume: the claim is one of the things it did.
    claim = [stack for what, stack in trace.stacks if what == "write from claim"]
    assert claim and claim[0][-3:] == ["resume/decide.py", "store/claims.py", "store/engine.py"]
