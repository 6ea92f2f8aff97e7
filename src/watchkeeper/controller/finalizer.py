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
from watchkeeper.client import Api, Conflict, Invalid, NotFound
from watchkeeper.controller.action import Action

JSON = dict[str, Any]
Handler = Callable[[JSON], Awaitable[Action] | Action]


async def _call(fn: Handler, obj: JSON) -> Action:
    result = fn(obj)
    action = await result if inspect.isawaitable(result) else result
    if not isinstance(action, Action):
        raise TypeError(f"finalizer handlers must return an Action, not {type(action).__name__}")
    return action


async def _live(api: Api, obj: JSON, name: str) -> JSON | None:
    """The object as the server has it now, if it is still the same object and still
    carries our finalizer; else None (nothing left for us to do)."""
    try:
        live = await api.get(meta.name(obj), namespace=meta.namespace(obj))
    except NotFound:
        return None
    if meta.uid(obj) and meta.uid(live) != meta.uid(obj):
        return None  # deleted and re-created under the same name: its own event covers it
    if name not in ((live.get("metadata") or {}).get("finalizers") or []):
        return None
    return live


async def _remove(api: Api, name: str, live: JSON, attempts: int = 5) -> None:
    """Remove our finalizer without running the cleanup again: when another writer changed
    the list first (the ``test`` fails: 422, or 409), read it again and retry."""
    for attempt in range(attempts):
        current: list[str] = list((live.get("metadata") or {}).get("finalizers") or [])
        if name not in current:
            return
        try:
            await api.patch(
                meta.name(live),
                [
                    {"op": "test", "path": "/metadata/finalizers", "value": current},
                    {"op": "replace", "path": "/metadata/finalizers",
                     "value": [f for f in current if f != name]},
                ],
                type="json", namespace=meta.namespace(live),
            )
            return
        except NotFound:
            return  # already gone: that is what removing the last finalizer leads to
        except (Conflict, Invalid):
            if attempt == attempts - 1:
                raise
            fresh = await _live(api, live, name)
            if fresh is None:
                return
            live = fresh


async def finalizer(
    api: Api, name: str, obj: JSON, apply_fn: Handler, cleanup_fn: Handler
) -> Action:
    """Call from a reconcile: ``return await finalizer(api, "example.com/cleanup", obj, ...)``.

    On deletion the object is read afresh before ``cleanup_fn`` runs: the cached copy lags
    behind the finalizer's own removal (a reconcile triggered meanwhile, e.g. by the cleanup
    deleting a child, would otherwise run the cleanup a second time), and an object already
    gone is a success. Cleanup can still run again after a crash, so it must be idempotent."""
    metadata = obj.get("metadata") or {}
    current: list[str] = list(metadata.get("finalizers") or [])
    ns = meta.namespace(obj)
    if metadata.get("deletionTimestamp"):
        if name not in current:
            return Action.await_change()  # ours already ran (or never was added)
        live = await _live(api, obj, name)
        if live is None:
            return Action.await_change()  # gone, replaced, or our finalizer already removed
        action = await _call(cleanup_fn, live)
        await _remove(api, name, live)
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
