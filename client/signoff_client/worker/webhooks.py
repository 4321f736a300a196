"""The worker's webhook receiver: signoff's ``call.decided``, ``call.expired`` and
``run.finished`` (a run ended elsewhere: its pause is cleared) wake a pass.

Every request is verified with the ``standardwebhooks`` library against the key's
``whsec_`` secret; a forged, stale or malformed one gets 401 and changes nothing. A verified
one only wakes the worker, which then reads the calls from the API: the body is not trusted
for what was decided. Delivery is at least once; a repeat only wakes another pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

log = logging.getLogger("signoff_client.worker")

#: Where the receiver listens: create the key with ``--webhook http://HOST:PORT/webhook``.
PATH = "/webhook"
#: The events that may let a paused run go on.
WAKING = frozenset({"call.decided", "call.expired", "run.finished"})


class WebhookReceiver:
    def __init__(self, secret: str, wake: Callable[[], None], *, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.webhook = Webhook(secret)  # raises on an empty or malformed secret, at start
        self.wake, self.host, self.port = wake, host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(PATH, self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        log.info("webhook receiver on http://%s:%s%s", self.host, self.port, PATH,
                 extra={"action": "webhook_receiver_start"})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            event = self.webhook.verify(body, dict(request.headers))
        except (WebhookVerificationError, ValueError) as exc:
            log.warning("webhook refused: %s", exc, extra={"action": "webhook_refused"})
            return web.json_response({"error": "unauthorized",
                                      "message": "the webhook's signature did not verify"},
                                     status=401)
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in WAKING:
            self.wake()
        return web.Response(status=204)
