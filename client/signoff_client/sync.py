"""The blocking face: the same client, for code that is not async.

``SyncSignoff`` runs the async client on an event loop in a background thread of its own
and waits for each round there, so there is one implementation of every guarantee.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from signoff_client import errors
from signoff_client.client import Signoff
from signoff_client.models import Call, Limits, RunInfo
from signoff_client.runs import Run
from signoff_client.tools import EvidenceFn, GuardFn, PreviewFn, ReconcileFn

T = TypeVar("T")


class _Loop:
    """An event loop in a daemon thread; ``call`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="signoff-client")
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class SyncRun:
    """A run, for blocking code. See ``signoff_client.Run`` for what each method does."""

    def __init__(self, loop: _Loop, run: Run) -> None:
        self._loop, self._run = loop, run

    @property
    def id(self) -> str:
        return self._run.id

    @property
    def answer(self) -> str | None:
        return self._run.answer

    @answer.setter
    def answer(self, value: str | None) -> None:
        self._run.answer = value

    def call(self, tool: str | Callable[..., Any], args: dict[str, Any] | None = None,
             **options: Any) -> Any:
        return self._loop.call(self._run.call(tool, args, **options))

    def finish(self, answer: str | None = None,
               requires: Sequence[str] | None = None) -> RunInfo:
        return self._loop.call(self._run.finish(answer, requires))

    def cancel(self) -> RunInfo:
        return self._loop.call(self._run.cancel())


_current_sync_run: ContextVar[SyncRun | None] = ContextVar("signoff_sync_run", default=None)


class SyncSignoff:
    """``Signoff`` for blocking code: ``with so.run(...) as run: run.call(...)``."""

    def __init__(self, url: str, api_key: str, **options: Any) -> None:
        self._loop = _Loop()
        self.client = Signoff(url, api_key, **options)

    def close(self) -> None:
        self._loop.call(self.client.aclose())
        self._loop.stop()

    def __enter__(self) -> SyncSignoff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def run(self, *, requester: str, title: str, limits: Limits | None = None,
            idempotency_key: str | None = None, requires: Sequence[str] = ()
            ) -> Iterator[SyncRun]:
        run = self._loop.call(self.client.start_run(
            requester=requester, title=title, limits=limits,
            idempotency_key=idempotency_key, requires=requires))
        sync_run = SyncRun(self._loop, run)
        token = _current_sync_run.set(sync_run)
        try:
            yield sync_run
        except BaseException as exc:
            self._loop.call(run.close(exc))
            raise
        else:
            self._loop.call(run.close(None))
        finally:
            _current_sync_run.reset(token)

    def reconcile(self, tools: Mapping[str, ReconcileFn] | None = None) -> list[Call]:
        return self._loop.call(self.client.reconcile(tools))

    def requires_approval(self, *, name: str | None = None, preview: PreviewFn | None = None,
                          guard: GuardFn | None = None, reconcile: ReconcileFn | None = None,
                          evidence: EvidenceFn | None = None,
                          approvers: Sequence[str] | None = None,
                          ttl_minutes: float | None = None
                          ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Gate a blocking function: calling it inside ``with so.run(...)`` does the round."""
        register = self.client.requires_approval(
            name=name, preview=preview, guard=guard, reconcile=reconcile, evidence=evidence,
            approvers=approvers, ttl_minutes=ttl_minutes)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(fn)
            tool_name = name or fn.__name__
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def gated(*args: Any, **kwargs: Any) -> Any:
                run = _current_sync_run.get()
                if run is None:
                    raise errors.NoRun(f"{tool_name} needs approval: call it inside "
                                       "`with so.run(...)`")
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return run.call(tool_name, dict(bound.arguments), approvers=approvers,
                                ttl_minutes=ttl_minutes)

            return gated

        return decorate


