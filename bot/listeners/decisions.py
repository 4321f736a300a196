"""Before and after a decision (a click or a submitted reason), shared by the listeners."""

from __future__ import annotations

import logging

from bot.services import Services
from resume import outcomes

log = logging.getLogger(__name__)


def settle(services: Services, decided: outcomes.Claimed | outcomes.Refusal, user: str) -> None:
    """The winner's run goes on in the background, after the ack; a refusal changed nothing.

    The card update was enqueued by the claim itself; the kick delivers it now.
    """
    if isinstance(decided, outcomes.Claimed):
        log.info("run %s claimed by %s (%s)", decided.run.id, user, decided.decision,
                 extra={"action": "click_won", "run_id": decided.run.id, "user": user})
        services.kick()
        services.spawn(decided.drive.go(), name=f"proceed:{decided.run.id}")
    else:
        log.info("decision by %s refused: %s", user, type(decided).__name__,
                 extra={"action": "click_refused", "user": user})
