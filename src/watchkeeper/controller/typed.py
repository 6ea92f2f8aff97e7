"""``TypedController[T]``: a ``Controller`` whose reconcile takes the object as a ``T``.

The watch and the cache keep dicts, as for any controller; the object is converted when a
reconcile is about to run (``models.from_dict``), so the cost is one conversion per
reconcile, not per event. A wrapper, not a subclass: its ``run`` takes another function
type than ``Controller.run`` (which mypy would refuse in a subclass)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from watchkeeper.backoff import Backoff
from watchkeeper.cache import TypedStore
from watchkeeper.client import Api
from watchkeeper.client.models import from_dict
from watchkeeper.client.typed_api import TypedApi
from watchkeeper.controller.action import Action
from watchkeeper.controller.config import ControllerConfig
from watchkeeper.controller.controller import Controller
from watchkeeper.controller.leadership import Elector
from watchkeeper.controller.operator import Operator
from watchkeeper.controller.predicates import Predicate
from watchkeeper.controller.recorder import Recorder
from watchkeeper.controller.sharded import ShardScope
from watchkeeper.controller.triggers import Mapper, WatchErrorHook
from watchkeeper.controller.workers import ErrorPolicy, Reconcile
from watchkeeper.watcher import WatchConfig

__all__ = ["TypedController", "TypedReconcile"]

T = TypeVar("T")
JSON = dict[str, Any]

TypedReconcile = Callable[[T, Any], Awaitable[Action] | Action]
"""``async def reconcile(obj: Website, ctx: Any) -> wk.Action``."""


def _untyped(api: Api | TypedApi[Any]) -> Api:
    return api.api if isinstance(api, TypedApi) else api


class TypedController(Generic[T]):
    """``wk.TypedController(client.api(Website)).owns(...).run(reconcile)``: the
    ``Controller`` under it is ``controller`` (health, stats, ``wk.run`` through
    ``operator()``; ``recorder`` publishes failure Events, as for a ``Controller``). An
    object that does not fit the class fails its reconcile with the
    ``msgspec.ValidationError`` (backoff, error policy), as any other failure; the error
    policy receives the object as a dict, since it may be the object that does not fit."""

    def __init__(
        self,
        api: TypedApi[T],
        config: ControllerConfig | None = None,
        *,
        watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
        predicate: Predicate | None = None,
        sharding: ShardScope | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.cls = api.cls
        self.api = api
        self.controller = Controller(api.api, config, watch_config=watch_config,
                                     backoff=backoff, predicate=predicate, sharding=sharding,
                                     recorder=recorder)

    def owns(
        self, child_api: Api | TypedApi[Any], *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None, predicate: Predicate | None = None,
    ) -> TypedController[T]:
        """Reconcile the owner whenever a child it owns (ownerReferences) changes."""
        self.controller.owns(_untyped(child_api), watch_config=watch_config, backoff=backoff,
                             predicate=predicate)
        return self

    def watches(
        self, api: Api | TypedApi[Any], mapper: Mapper, *,
        watch_config: WatchConfig | None = None, backoff: Backoff | None = None,
        predicate: Predicate | None = None,
    ) -> TypedController[T]:
        """Reconcile whatever ``mapper(obj)`` (obj: a dict) names when ``api`` changes."""
        self.controller.watches(_untyped(api), mapper, watch_config=watch_config,
                                backoff=backoff, predicate=predicate)
        return self

    @property
    def store(self) -> TypedStore[T]:
        """The cache of the main resource, read as ``T``."""
        return TypedStore(self.controller.store, self.cls)

    def reconciler(self, reconcile: TypedReconcile[T]) -> Reconcile:
        """``reconcile`` as the dict-taking function a ``Controller`` runs."""
        cls = self.cls
        if inspect.iscoroutinefunction(reconcile):
            coro: Callable[[T, Any], Awaitable[Action]] = reconcile

            async def run_typed(obj: JSON, ctx: Any) -> Action:
                return await coro(from_dict(cls, obj), ctx)
        else:
            async def run_typed(obj: JSON, ctx: Any) -> Action:
                result = reconcile(from_dict(cls, obj), ctx)
                return await result if inspect.isawaitable(result) else result

        run_typed.__qualname__ = getattr(reconcile, "__qualname__", "reconcile")
        return run_typed

    def operator(
        self, reconcile: TypedReconcile[T], error_policy: ErrorPolicy | None = None,
        context: Any = None, *, on_watch_error: WatchErrorHook | None = None,
    ) -> Operator:
        """This controller and its reconcile, for ``wk.run(...)``."""
        return Operator(self.controller, self.reconciler(reconcile), error_policy, context,
                        on_watch_error)

    async def run(
        self,
        reconcile: TypedReconcile[T],
        error_policy: ErrorPolicy | None = None,
        context: Any = None,
        *,
        on_watch_error: WatchErrorHook | None = None,
        stop: asyncio.Event | None = None,
        force: asyncio.Event | None = None,
        elector: Elector | None = None,
    ) -> None:
        """``Controller.run`` with a typed reconcile (same stopping, signals, health)."""
        await self.controller.run(self.reconciler(reconcile), error_policy, context,
                                  on_watch_error=on_watch_error, stop=stop, force=force,
                                  elector=elector)
