"""Tools: what an agent may call, who may use them (Scope), and how signoff checks a call
before and after a pause."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# One definition for hosted apps and external agents: a guard's verdict and a
# reconciliation mean the same on both sides of the API.
from signoff_client.tools import Guard as Guard
from signoff_client.tools import Reconciliation as Reconciliation

from resume.messages import ToolSpec
from resume.outbox import FieldChange, PreviewData
from store.records import Run

A = TypeVar("A", bound=BaseModel)


class Scope(BaseModel):
    """Which tools and resources a user may use; resolved by the app, re-resolved on every resume.

    ``tools`` lists tool names, or ``"*"`` for all. ``resources`` maps a
    resource kind (e.g. "account") to the ids the user may touch; a tool's
    guard or preview reads them. ``attrs`` is free-form app data.
    """

    model_config = ConfigDict(frozen=True)

    user_id: str
    tools: list[str] | str = Field(default_factory=list)
    resources: dict[str, list[str]] = Field(default_factory=dict)
    attrs: dict[str, Any] = Field(default_factory=dict)

    def permits(self, tool: str) -> bool:
        return self.tools == "*" or (isinstance(self.tools, list) and tool in self.tools)

    def may_use(self, kind: str, resource_id: str) -> bool:
        allowed = self.resources.get(kind)
        return allowed is not None and ("*" in allowed or resource_id in allowed)


#: The app's resolver: user id -> the user's scope as it is now.
ScopeResolver = Callable[[str], Awaitable[Scope]]


class Preview(BaseModel):
    """What an approver is shown. Its digest is what the approval is bound to."""

    model_config = ConfigDict(frozen=True)

    title: str
    fields: list[tuple[str, str]] = []
    body: str | None = None

    def canonical(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)

    def digest(self) -> str:
        """sha256 of the canonical JSON: equal previews, equal digests."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()

    def data(self) -> PreviewData:
        return PreviewData(title=self.title, fields=self.fields, body=self.body)


def diff(old: Preview, new: Preview) -> list[FieldChange]:
    """Field-by-field changes old -> new, in the new preview's order, then removed fields."""
    before, after = dict(old.fields), dict(new.fields)
    changes = [FieldChange(field=k, old=before.get(k), new=v)
               for k, v in new.fields if before.get(k) != v]
    changes += [FieldChange(field=k, old=v, new=None) for k, v in old.fields if k not in after]
    if old.title != new.title:
        changes.insert(0, FieldChange(field="title", old=old.title, new=new.title))
    if old.body != new.body:
        changes.append(FieldChange(field="details", old=old.body, new=new.body))
    return changes


@dataclass(frozen=True)
class ToolContext:
    """What a tool sees when it runs (or when its guard checks a call)."""

    run_id: str
    user_id: str
    scope: Scope
    idempotency_key: str
    confirmed: bool
    #: The run as stored when the call was made: read-only (a frozen record); a tool
    #: changes a run only through its result. ``run_id``/``user_id`` repeat its fields.
    run: Run


@dataclass(frozen=True)
class Decider:
    """Who clicked, for an approvers predicate."""

    user_id: str
    requester: str
    #: The clicker's own workspace (Slack's ``user.team_id``): a Slack Connect guest's
    #: differs from the members'. None when the door does not know it.
    team_id: str | None = None


@dataclass(frozen=True)
class Approvers:
    """Who may approve: the requester (default), fixed user ids, or a predicate.

    ``allow_requester`` says whether the person who asked may decide their own
    request when the list or the predicate would allow them; ``False`` means
    someone else must. ``signoff serve`` warns at start about every tool that
    leaves it ``True``.
    """

    users: tuple[str, ...] = ()
    predicate: Callable[[Decider], bool] | None = None
    #: How people are told who may decide under ``predicate`` ("someone in finance
    #: other than the requester"): a predicate has no list of names to show.
    description: str = ""
    allow_requester: bool = True

    def __post_init__(self) -> None:
        if not self.allow_requester and not self.users and self.predicate is None:
            raise ValueError("Approvers(allow_requester=False) needs users or a predicate: "
                             "otherwise nobody may approve")

    def allows(self, actor: str, requester: str, team_id: str | None = None) -> bool:
        if actor == requester and not self.allow_requester:
            return False
        if self.predicate is not None:
            return self.predicate(Decider(actor, requester, team_id))
        if self.users:
            return actor in self.users
        return actor == requester

    def requester_may_decide(self) -> bool:
        """Whether a requester might decide their own request under this policy."""
        return self.allow_requester

    def listed(self, requester: str) -> list[str] | None:
        """Named approvers for the card; None when it is the requester or a predicate."""
        if not self.users or self.predicate is not None:
            return None
        if self.allow_requester:
            return list(self.users)
        return [u for u in self.users if u != requester]

    def policy(self) -> str | None:
        """Who may decide, in words, for a predicate; None when names say it."""
        if self.predicate is None:
            return None
        return self.description or "someone the approval policy allows"


REQUESTER = Approvers()


@dataclass(frozen=True)
class Tool(Generic[A]):
    """A tool an agent may call.

    ``confirm`` says whether a person must approve a call first (or a
    predicate on the arguments and scope). ``reconcile`` answers "did the
    write with this idempotency key happen?" after a crash; ``idempotent``
    tools are simply called again with the same key.
    """

    name: str
    description: str
    args: type[A]
    execute: Callable[[A, ToolContext], Awaitable[dict[str, Any]]]
    preview: Callable[[A, Scope], Awaitable[Preview]] | None = None
    guard: Callable[[A, Scope, ToolContext], Awaitable[Guard]] | None = None
    reconcile: Callable[[str, A], Awaitable[Reconciliation]] | None = None
    confirm: bool | Callable[[A, Scope], bool] = False
    approvers: Approvers = REQUESTER
    idempotent: bool = False
    dangerous: bool = False
    #: Key fields of a result, for the evidence in the final notice.
    evidence: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    tags: Sequence[str] = field(default_factory=tuple)

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description,
                        parameters=self.args.model_json_schema())

    def parse(self, arguments: dict[str, Any]) -> A:
        """Validate arguments; raises ValidationError."""
        return self.args.model_validate(arguments)

    def needs_confirmation(self, args: A, scope: Scope) -> bool:
        return self.confirm(args, scope) if callable(self.confirm) else self.confirm

    async def render_preview(self, args: A, scope: Scope) -> Preview:
        if self.preview is not None:
            return await self.preview(args, scope)
        fields = [(k, json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)
                  for k, v in args.model_dump(mode="json").items()]
        return Preview(title=f"Run {self.name}", fields=fields)

    async def check(self, args: A, scope: Scope, ctx: ToolContext) -> Guard:
        return await self.guard(args, scope, ctx) if self.guard is not None else Guard.passed()

    def key_fields(self, result: Any) -> dict[str, Any]:
        if not isinstance(result, dict):
            return {}
        if self.evidence is not None:
            return self.evidence(result)
        scalars = {k: v for k, v in result.items() if isinstance(v, str | int | float | bool)}
        return dict(list(scalars.items())[:6])


def validation_message(exc: ValidationError) -> str:
    """A short, model-readable account of what was wrong with the arguments."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
             for e in exc.errors()[:5]]
    return "invalid arguments: " + "; ".join(parts)
