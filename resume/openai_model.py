"""A ``Model`` for any OpenAI-compatible chat-completions endpoint, over aiohttp.

Works with OpenAI itself and with servers that copy its API (vLLM, Ollama,
LiteLLM, OpenRouter, ...). Our ``Message`` is translated to the provider's
format here and nowhere else; spend is computed from the reported token usage
and the prices the operator configured.

No retries: a failed call raises a ``ModelError`` subclass naming the status,
the endpoint and the remedy, and the loop decides whether waiting is worth it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from pydantic import ValidationError

from resume import model
from resume.messages import Message, ModelReply, ToolCall, ToolSpec, Usage

logger = logging.getLogger(__name__)


class OpenAICompatibleModel:
    """POSTs to ``{base_url}/chat/completions``; e.g. ``base_url="https://api.openai.com/v1"``.

    Prices are USD per 1,000 tokens. ``timeout_s`` bounds the whole request.
    A ``session`` passed in is borrowed and left open; one created here is
    closed by ``aclose()`` (or by leaving ``async with``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        price_per_1k_prompt_usd: float,
        price_per_1k_completion_usd: float,
        timeout_s: float = 60,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.endpoint = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.price_per_1k_prompt_usd = price_per_1k_prompt_usd
        self.price_per_1k_completion_usd = price_per_1k_completion_usd
        self.timeout_s = timeout_s
        self._api_key = api_key
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> OpenAICompatibleModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session if this object created it; a borrowed one stays open."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [to_openai(m) for m in messages],
        }
        if tools:  # providers reject tool_choice without tools
            body["tools"] = [_tool_to_openai(t) for t in tools]
            body["tool_choice"] = "auto"
        status, headers, text = await self._post(body)
        if status == 429:
            raise model.ModelRateLimited(_retry_after(headers), endpoint=self.endpoint)
        if status >= 500:
            raise model.ModelServerError(status, text, endpoint=self.endpoint)
        if status >= 400:
            raise model.ModelRequestError(status, _error_message(text), endpoint=self.endpoint)
        if status >= 300:
            raise model.ModelBadResponse(f"unexpected HTTP {status}", endpoint=self.endpoint)
        return self._reply(text)

    async def _post(self, body: Mapping[str, Any]) -> tuple[int, Mapping[str, str], str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self._session is None:
            self._session = aiohttp.ClientSession()
        started = time.monotonic()
        try:
            async with self._session.post(
                self.endpoint,
                data=json.dumps(body),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            ) as response:
                text = await response.text(errors="replace")
                status, response_headers = response.status, dict(response.headers)
        except TimeoutError as exc:  # aiohttp's timeouts subclass it (asyncio's, on 3.11)
            raise model.ModelTimeout(self.timeout_s, endpoint=self.endpoint) from exc
        except aiohttp.ClientConnectionError as exc:
            raise model.ModelUnreachable(str(exc), endpoint=self.endpoint) from exc
        logger.debug(
            "model call",
            extra={
                "action": "model_call",
                "endpoint": self.endpoint,
                "status": status,
                "elapsed_ms": int((time.monotonic() - started) * 1000),
            },
        )
        return status, response_headers, text

    def _reply(self, text: str) -> ModelReply:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise model.ModelBadResponse(
                f"body is not JSON ({exc.msg}): {text[:200]!r}", endpoint=self.endpoint
            ) from exc
        try:
            message = from_openai(_first_choice(data))
            reply = ModelReply(message=message, usage=self._usage(data.get("usage")))
        except (ValueError, TypeError) as exc:
            # ValidationError is a ValueError: a reply that breaks our invariants.
            detail = _validation_detail(exc) if isinstance(exc, ValidationError) else str(exc)
            raise model.ModelBadResponse(detail, endpoint=self.endpoint) from exc
        return reply

    def _usage(self, raw: Any) -> Usage:
        if not isinstance(raw, dict):  # some compatible servers omit usage
            return Usage()
        prompt = int(raw.get("prompt_tokens") or 0)
        completion = int(raw.get("completion_tokens") or 0)
        cost = (
            prompt * self.price_per_1k_prompt_usd + completion * self.price_per_1k_completion_usd
        ) / 1000
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)


def to_openai(message: Message) -> dict[str, Any]:
    """Our message as an OpenAI chat message.

    ``name`` is not sent: on tool results it is ours (the tool's name), and
    providers disagree about accepting it. Arguments the model mangled are sent
    back as ``{}``: some providers reject a history holding invalid JSON, and
    the tool's error result already tells the model what went wrong.
    """
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content or "",
        }
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role != "assistant":
        out["content"] = message.content or ""
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return out


def from_openai(raw: Mapping[str, Any]) -> Message:
    """An OpenAI assistant message as ours; raises ValueError/TypeError if it is not one."""
    calls = [_call_from_openai(c) for c in raw.get("tool_calls") or []]
    return Message.assistant(_text(raw.get("content")), calls)


def _first_choice(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        if error is not None:  # some servers report failures with a 200
            raise ValueError(f"no choices; the server said: {_error_message(json.dumps(error))}")
        raise ValueError("no choices in the response")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise ValueError("choices[0] has no message")
    return message


def _call_from_openai(raw: Any) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise ValueError(f"tool call without a function: {raw!r}")
    function = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool call without a function name: {raw!r}")
    call_id = raw.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    arguments, raw_arguments = _parse_arguments(function.get("arguments"))
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw_arguments)


def _parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict; on anything but a JSON object, ``({}, what was sent)``."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):  # a few servers send the object itself
        return raw, None
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return {}, text
    if not isinstance(parsed, dict):
        return {}, text
    return parsed, None


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)) or None
    raise TypeError(f"message content is {type(content).__name__}, expected text")


def _tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(text: str) -> str:
    """The provider's own error message when the body is ``{"error": {"message": ...}}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(data, dict):
        data = data.get("error", data)
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])
    if isinstance(data, str):
        return data
    return text


def _validation_detail(exc: ValidationError) -> str:
    return "; ".join(str(e.get("msg", "")) for e in exc.errors())
