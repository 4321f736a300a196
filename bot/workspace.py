"""Only the bot's own workspace: a request from any other team or enterprise is refused.

The bot token belongs to one workspace; Bolt learns which from one ``auth.test``
(the authorize result in ``context``). A Bolt global middleware, so it guards
every door Bolt serves (HTTP and Socket Mode alike), compares it with every team
and enterprise the request names: ``team.id`` / ``team_id``, ``user.team_id``
and ``enterprise.id`` / ``enterprise_id``. Any mismatch is logged
(``action: foreign_workspace``), nothing runs, and the sender gets
``403 {"error": "request from another workspace"}``.

A Slack Connect guest (a person of another team, in a channel shared with
this workspace) carries their own team in ``user.team_id``: refused too, so
only members of the bot's workspace ask, approve or decline.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse

log = logging.getLogger(__name__)

FOREIGN_STATUS = 403
FOREIGN_BODY = json.dumps({"error": "request from another workspace"})


async def only_own_workspace(
    body: dict[str, Any],
    context: AsyncBoltContext,
    next: Callable[[], Awaitable[BoltResponse]],  # Bolt passes arguments by these names
) -> BoltResponse:
    """Bolt global middleware: call the listeners only for the bot's own workspace."""
    authorized = context.authorize_result
    if authorized is None:  # Bolt answers requests that need no authorization itself
        return await next()
    own = {"team": authorized.team_id, "enterprise": authorized.enterprise_id}
    foreign = [(kind, found) for kind, found in named(body) if found != own[kind]]
    if not foreign:
        return await next()
    log.warning("refused a request from another workspace: %s",
                ", ".join(f"{kind} {found!r}" for kind, found in foreign),
                extra={"action": "foreign_workspace", "named": dict(foreign),
                       "own_team": own["team"], "own_enterprise": own["enterprise"]})
    return BoltResponse(status=FOREIGN_STATUS, body=FOREIGN_BODY,
                        headers={"content-type": "application/json"})


def named(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Every (``team`` | ``enterprise``, id) the request names, as Slack sends them."""
    yield from _ids("team", body.get("team"), body.get("team_id"))
    user = body.get("user")
    if isinstance(user, dict):
        yield from _ids("team", user.get("team_id"))
    yield from _ids("enterprise", body.get("enterprise"), body.get("enterprise_id"))


def _ids(kind: str, *values: Any) -> Iterator[tuple[str, str]]:
    for value in values:
        found = value.get("id") if isinstance(value, dict) else value
        if found not in (None, ""):
            yield kind, str(found)
