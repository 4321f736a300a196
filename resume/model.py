"""What a run needs from a language model, and how a model call fails.

A ``Model`` turns the conversation so far and the tools on offer into one
assistant message plus its usage. It keeps no state between calls: the run's
stored messages are the whole memory, which is what makes resuming possible.

Errors share one root, ``ModelError``. ``retryable`` says whether trying the same
call again later can help; nothing here retries by itself, because whether to
wait (and spend budget) is the loop's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from resume.messages import Message, ModelReply, ToolSpec


class Model(Protocol):
    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        """Answer ``messages`` with one assistant message; may raise ``ModelError``."""
        ...


def _at(endpoint: str | None) -> str:
    return f" at {endpoint}" if endpoint else ""


def _snippet(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ModelError(Exception):
    """The model could not produce a reply."""

    #: Whether the same call may succeed if tried again later.
    retryable: bool = False

    def __init__(self, message: str | None = None, *, endpoint: str | None = None) -> None:
        self.endpoint = endpoint
        super().__init__(message or self.__doc__)


class ModelRateLimited(ModelError):
    """The model endpoint is rate limiting us (HTTP 429)."""

    retryable = True

    def __init__(self, retry_after: float | None = None, *, endpoint: str | None = None) -> None:
        self.retry_after = retry_after
        self.status = 429
        wait = (
            f"retry after {retry_after:g}s (Retry-After)"
            if retry_after is not None
            else "back off before retrying (no Retry-After given)"
        )
        super().__init__(
            f"model endpoint{_at(endpoint)} answered 429 Too Many Requests; {wait}. "
            "If this persists, lower concurrency or raise the provider's rate limit.",
            endpoint=endpoint,
        )


class ModelServerError(ModelError):
    """The model endpoint failed on its side (HTTP 5xx)."""

    retryable = True

    def __init__(self, status: int, body: str = "", *, endpoint: str | None = None) -> None:
        self.status = status
        self.body = body
        said = f": {_snippet(body)}" if body.strip() else ""
        super().__init__(
            f"model endpoint{_at(endpoint)} answered {status} (server error){said}. "
            "The provider is failing; retry later or check its status page.",
            endpoint=endpoint,
        )


_REQUEST_REMEDY = {
    401: "check the API key",
    403: "check the API key and that it may use this model",
    404: "check the base URL (it should end before /chat/completions) and the model name",
}


class ModelRequestError(ModelError):
    """The model endpoint rejected the request (HTTP 4xx other than 429)."""

    def __init__(self, status: int, body: str = "", *, endpoint: str | None = None) -> None:
        self.status = status
        #: The provider's error message when it sent one, else the raw body.
        self.body = body
        remedy = _REQUEST_REMEDY.get(status, "check the model name, the messages and tool schemas")
        said = f": {_snippet(body)}" if body.strip() else ""
        super().__init__(
            f"model endpoint{_at(endpoint)} rejected the request with {status}{said}. "
            f"Retrying will not help; {remedy}.",
            endpoint=endpoint,
        )


class ModelTimeout(ModelError):
    """The model endpoint did not answer in time."""

    retryable = True

    def __init__(self, timeout_s: float | None = None, *, endpoint: str | None = None) -> None:
        self.timeout_s = timeout_s
        within = f" within {timeout_s:g}s" if timeout_s is not None else ""
        super().__init__(
            f"model endpoint{_at(endpoint)} did not answer{within}. "
            "Retry later, or raise timeout_s if long completions are expected.",
            endpoint=endpoint,
        )


class ModelUnreachable(ModelError):
    """The model endpoint could not be reached (connection failed)."""

    retryable = True

    def __init__(self, detail: str = "", *, endpoint: str | None = None) -> None:
        self.detail = detail
        why = f": {detail}" if detail else ""
        super().__init__(
            f"could not connect to model endpoint{_at(endpoint)}{why}. "
            "Check the base URL and that the server is up.",
            endpoint=endpoint,
        )


class ModelBadResponse(ModelError):
    """The model endpoint answered, but not with a usable chat completion."""

    def __init__(self, detail: str = "", *, endpoint: str | None = None) -> None:
        self.detail = detail
        why = f": {detail}" if detail else ""
        super().__init__(
            f"model endpoint{_at(endpoint)} sent an unusable response{why}. "
            "Check that it speaks the OpenAI chat-completions format with tool calls.",
            endpoint=endpoint,
        )
