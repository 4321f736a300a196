"""The Bolt app: a Web API client pointed at ``SLACK_API_URL``, and the listeners wired in.

Only wiring lives here, as in Slack's bolt-python starter template: one global
middleware puts the process's :class:`~bot.services.Services` in every
request's context, and ``listeners.register(app)`` attaches the module-level
listener callbacks, which find the services there.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot import config, listeners
from bot.services import Services

#: Retries of one Web API call made while handling a request (the outbox job
#: retries its own deliveries durably on top of these).
RATE_LIMIT_RETRIES = 2
SERVER_ERROR_RETRIES = 2
CONNECTION_RETRIES = 2


def web_client(settings: config.Settings) -> AsyncWebClient:
    """Slack's Web API (or a stand-in at ``SLACK_API_URL``), retrying 429s, 5xx and resets.

    Bolt copies the base URL and these handlers into every per-request client.
    """
    credentials = settings.require_slack()
    return AsyncWebClient(
        token=credentials.bot_token,
        base_url=settings.slack_api_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
            AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
            AsyncServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES),
        ],
    )


def build(services: Services) -> AsyncApp:
    """The AsyncApp with signature verification on, ``services`` in every request's context,
    and every listener registered.

    ``process_before_response=False``: the HTTP response goes out when a
    listener acks; the listener carries on after it.
    """
    credentials = services.settings.require_slack()
    app = AsyncApp(
        client=services.client,
        signing_secret=credentials.signing_secret,
        process_before_response=False,
        request_verification_enabled=True,
        name="signoff",
    )
    app.use(services.into_context)  # before every listener, on every door: own workspace only
    listeners.register(app)
    return app
