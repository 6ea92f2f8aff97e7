"""``finalizer``: run cleanup before an object may go, exactly once per deletion.

The finalizer is added (and observed) before the first apply, so an object can never be
deleted without its cleanup running; it is removed only after cleanup succeeded. Writes
are JSON patches with a ``test`` of the current list, so two writers cannot clobber each
other's finalizers.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from watchkeeper import meta
from watchkeeper.client import Api
from watchkeeper.controller.action import Action

JSON = dict[str, Any]
Handler = Callable[[JSON], Awaitable[Action] | Action]


async def _call(fn: Handler, obj: JSON) -> Action:
    result = fn(obj)
    action = await result if inspect.isawaitable(result) else result
    if not isinstance(action, Action):
        raise TypeError(f"finalizer handlers must return an Action, not {type(action).__name__}")
    return action


async def finalizer(
    api: Api, name: str, obj: JSON, apply_fn: Handler, cleanup_fn: Handler
) -> Action:
    """Call from a reconcile: ``return await finalizer(api, "example.com/cleanup", obj, ...)``."""
    metadata = obj.get("metadata") or {}
    current: list[str] = list(metadata.get("finalizers") or [])
    ns = meta.namespace(obj)
    if metadata.get("deletionTimestamp"):
        if name not in current:
            return Action.await_change()  # ours already ran (or never was added)
        action = await _call(cleanup_fn, obj)
        remaining = [f for f in current if f != name]
        await api.patch(
            meta.name(obj),
            [
                {"op": "test", "path": "/metadata/finalizers", "value": current},
                {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
            ],
            type="json", namespace=ns,
        )
        return action
    if name not in current:
        patch: list[JSON] = (
            [
                {"op": "test", "path": "/metadata/finalizers", "value": current},
                {"op": "add", "path": "/metadata/finalizers/-", "value": name},
            ]
            if "finalizers" in metadata and metadata["finalizers"] is not None
            else [{"op": "add", "path": "/metadata/finalizers", "value": [name]}]
        )
        await api.patch(meta.name(obj), patch, type="json", namespace=ns)
        return Action.await_change()  # the update triggers the next reconcile
    return await _call(apply_fn, obj)
