"""Named crash points for fault-injection tests that kill real processes.

``SIGNOFF_FAULT_AT=<point>`` makes the process SIGKILL itself when it reaches
that point: no cleanup, no finally blocks, exactly like a power cut. Unset (as
in production) a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

AFTER_LEDGER_STARTED = "after_ledger_started"
AFTER_TOOL_WRITE = "after_tool_write"
AFTER_RESULT_COMMIT = "after_result_commit"
DURING_MODEL_CALL = "during_model_call"

POINTS = (AFTER_LEDGER_STARTED, AFTER_TOOL_WRITE, AFTER_RESULT_COMMIT, DURING_MODEL_CALL)


def point(name: str) -> None:
    if os.environ.get("SIGNOFF_FAULT_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
