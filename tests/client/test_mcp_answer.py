"""The gateway's run answer quotes the upstream's error, and must still be one the API takes."""

from __future__ import annotations

from signoff_client.adapters.mcp_gateway import ANSWER_MAX, clipped

from bot.api.models import FinishRun


def test_a_huge_upstream_error_still_finishes_the_run() -> None:
    said = "refund_order ran and failed: " + "the ledger said no. " * 5_000  # 100,000 chars

    answer = clipped(said)

    FinishRun(answer=answer, requires=["refund_order"])  # the API would refuse the unclipped one
    assert len(answer) == ANSWER_MAX and answer.endswith("…")
    assert answer.startswith("refund_order ran and failed: the ledger said no.")


def test_a_short_upstream_error_is_quoted_whole() -> None:
    said = "refund_order ran and failed: refund of 50.00 is more than the 40.00 left on A-1"

    assert clipped(said) == said
