"""Purge: the clock deletes answered, halted and failed runs kept past ``rt.retention``.

Suspended and running runs are never purged, however old. Deletion happens in
batches (see ``store.retention.purge``), so concurrent purges and live runs
never wait long on each other; a run is deleted once, by whichever purge gets
to it.
"""

from __future__ import annotations

import logging
from datetime import datetime

from resume.runtime import Runtime
from store import retention

log = logging.getLogger(__name__)


async def purge(rt: Runtime, now: datetime | None = None) -> int:
    """Delete finished runs last updated before ``now - rt.retention``; how many went."""
    now = now or rt.now()
    deleted = await retention.purge(rt.db, before=now - rt.retention)
    if deleted:
        log.info("purged %d runs older than %s", deleted, rt.retention,
                 extra={"action": "purge", "count": deleted})
    return deleted
