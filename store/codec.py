"""JSON documents as stored text, with size limits checked before any write.

Documents are stored as text, not JSONB: PostgreSQL's JSONB refuses ``\\u0000``,
which model output can contain. ``json.dumps`` escapes control characters, so
the text never holds a NUL byte and round-trips byte-for-byte.
"""

from __future__ import annotations

import json
from typing import Any

from store import errors

#: One conversation message (a model reply or a tool result). Larger results
#: should be summarised by the tool; 256 KiB is far above any model's useful input.
MAX_MESSAGE_BYTES = 256 * 1024
#: Any other document: event data, tool arguments and results, previews, outbox payloads.
MAX_DOCUMENT_BYTES = 128 * 1024


def dumps(value: Any, *, what: str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """Encode ``value``; raise NotSerializable or PayloadTooLarge, naming ``what``."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise errors.NotSerializable(what, str(exc)) from exc
    size = len(text.encode("utf-8"))
    if size > limit:
        raise errors.PayloadTooLarge(what, size, limit)
    return text


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
