"""The conversation, as data: what a run says to its model and what the model says back.

These models are the canonical format of ``run_messages.message``: a run's messages
are stored as ``message.model_dump(mode="json")`` and read back with
``Message.model_validate(row)``. Resuming a run hands exactly these back to the
model, so nothing provider-specific lives here; adapters such as
``resume.openai_model`` translate at the edge.

All models are frozen: a message, once appended to a run, is a fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["system", "user", "assistant", "tool"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """One tool the model asked to run.

    ``arguments`` is already parsed. When the model sent arguments that are not a
    JSON object, ``arguments`` is ``{}`` and ``raw_arguments`` keeps what it sent,
    so the loop can answer with an error result instead of crashing.

    ``id`` may be left empty by a script; ``ScriptedModel`` fills it in, and every
    ``ModelReply`` carries non-empty, distinct ids.
    """

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None

    @property
    def malformed(self) -> bool:
        """True when the model's arguments could not be read as a JSON object."""
        return self.raw_arguments is not None


class Message(_Frozen):
    """One entry of a run's conversation.

    Invariants: system and user messages have text; only assistant messages carry
    ``tool_calls``; a tool message answers one call (``tool_call_id``) and ``name``
    is that tool's name.
    """

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _check_role_shape(self) -> Self:
        if self.role in ("system", "user") and self.content is None:
            raise ValueError(f"a {self.role} message needs content")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError(f"tool_call_id belongs on tool messages, not {self.role}")
        return self

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str | None = None, tool_calls: Sequence[ToolCall] = ()) -> Message:
        return cls(role="assistant", content=text, tool_calls=list(tool_calls))

    @classmethod
    def tool_result(cls, call_id: str, name: str, content: str) -> Message:
        return cls(role="tool", content=content, tool_call_id=call_id, name=name)


class ToolSpec(_Frozen):
    """What the model is told about a tool: its name, purpose and argument schema."""

    name: str
    description: str
    #: JSON schema of the arguments object.
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(_Frozen):
    """What one model call consumed. Add them up with ``+``."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0.0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class ModelReply(_Frozen):
    """An assistant message and what producing it cost.

    The message's tool calls have non-empty ids, distinct within the message.
    """

    message: Message
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="after")
    def _check_reply(self) -> Self:
        if self.message.role != "assistant":
            raise ValueError(f"a model reply is an assistant message, not {self.message.role}")
        ids = [call.id for call in self.message.tool_calls]
        if any(not call_id for call_id in ids):
            raise ValueError("every tool call in a model reply needs an id")
        if len(set(ids)) != len(ids):
            raise ValueError(f"tool call ids in one reply must be distinct, got {ids}")
        return self
