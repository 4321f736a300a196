"""resume: agent runs that pause for a person and resume exactly once.

Everything an app author needs is importable from here::

    from resume import App, Tool, Preview, Guard, Scope, Limits, ScriptedModel, Message

The entries the doors call (``resume.ask``, ``resume.decide``, ``resume.proceed``,
``resume.grant``, ``resume.cancel``, ``resume.expire``, ``resume.reap``,
``resume.purge``) and their outcomes (``resume.outcomes``) are modules of their own.
"""

from resume.apps import SNAPSHOT_VERSION, App, load
from resume.budget import GrantPolicy, Limits
from resume.messages import Message, ModelReply, ToolCall, ToolSpec, Usage
from resume.model import Model, ModelError
from resume.openai_model import OpenAICompatibleModel
from resume.routes import Branch, RouteDecision, RouteFunction, Router
from resume.runtime import Runtime
from resume.scripted import (
    Script,
    ScriptedModel,
    ScriptExhausted,
    Turn,
    call,
    did_not_finish,
    result_of,
)
from resume.tools import (
    Approvers,
    Decider,
    Guard,
    Preview,
    Reconciliation,
    Scope,
    ScopeResolver,
    Tool,
    ToolContext,
)
from store.engine import DEFAULT_URL, Database, connect

__all__ = [
    "DEFAULT_URL",
    "SNAPSHOT_VERSION",
    "App",
    "Approvers",
    "Branch",
    "Database",
    "Decider",
    "GrantPolicy",
    "Guard",
    "Limits",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAICompatibleModel",
    "Preview",
    "Reconciliation",
    "RouteDecision",
    "RouteFunction",
    "Router",
    "Runtime",
    "Scope",
    "ScopeResolver",
    "Script",
    "ScriptExhausted",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolSpec",
    "Turn",
    "Usage",
    "call",
    "connect",
    "did_not_finish",
    "load",
    "result_of",
]
