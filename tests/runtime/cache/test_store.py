"""Store/Writer semantics on event sequences (the socket-level tests are in test_reflector)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk


def cm(name: str, rv: str = "1", ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels}}


async def events(*evs: wk.Event) -> AsyncIterator[wk.Event]:
    for ev in evs:
        yield ev


async def run(writer: wk.Writer, *evs: wk.Event) -> list[wk.Event]:
    return [ev async for ev in wk.reflector(writer, events(*evs))]


async def test_relist_swaps_at_init_done_and_reports_vanished_objects() -> None:
    store, writer = wk.Store.new()
    await run(writer, wk.InitStart(), wk.InitApply(cm("a")), wk.InitApply(cm("b")), wk.InitDone())
    assert sorted(o["metadata"]["name"] for o in store) == ["a", "b"]

    # A relist in progress must not be visible until InitDone.
    out = []
    gen = wk.reflector(writer, events(wk.InitStart(), wk.InitApply(cm("b", "5")), wk.InitDone()))
    out.append(await anext(gen))
    out.append(await anext(gen))
    assert len(store) == 2 and store.get("a", namespace="default") is not None
    out.extend([ev async for ev in gen])
    assert store.get("a", namespace="default") is None
    assert store.get("b", namespace="default") == cm("b", "5")
    deletes = [ev for ev in out if isinstance(ev, wk.Delete)]
    assert [d.obj["metadata"]["name"] for d in deletes] == ["a"]
    assert isinstance(out[-1], wk.InitDone)


async def test_apply_and_delete_update_indexes() -> None:
    store, writer = wk.Store.new()
    store.index_by("app", lambda o: [o["metadata"]["labels"].get("app", "")])
    a = cm("a", app="web")
    await run(writer, wk.InitStart(), wk.InitApply(a), wk.InitDone())
    assert store.by_index("app", "web")[0] is a  # the dict written, handed out once
    again = store.by_index("app", "web")[0]
    assert again == a and again is not a  # then a new one per read, decoded
    await run(writer, wk.Apply(cm("a", "2", app="db")))
    assert store.by_index("app", "web") == []
    assert [o["metadata"]["name"] for o in store.by_index("app", "db")] == ["a"]
    await run(writer, wk.Delete(cm("a", "3", app="db")))
    assert store.by_index("app", "db") == [] and len(store) == 0
    with pytest.raises(KeyError, match="no index named 'nope'"):
        store.by_index("nope", "x")


async def test_snapshot_iteration_is_safe_while_the_store_changes() -> None:
    store, writer = wk.Store.new()
    await run(writer, wk.InitStart(), *(wk.InitApply(cm(f"o{i}")) for i in range(5)), wk.InitDone())
    seen = 0
    for _obj in store:
        writer.apply(wk.Apply(cm(f"new{seen}")))
        seen += 1
    assert seen == 5 and len(store) == 10


async def test_ready_follows_first_sync_and_watcher_health() -> None:
    store, writer = wk.Store.new()
    health = wk.WatchHealth(resource="configmaps")
    writer.bind_health(health)
    assert not store.ready
    waiter = asyncio.create_task(store.wait_until_ready(timeout=5))
    await asyncio.sleep(0)
    assert not waiter.done()
    health.state = wk.WatchState.HEALTHY
    writer.apply(wk.InitStart())
    writer.apply(wk.InitDone())
    await waiter
    assert store.ready
    health.state = wk.WatchState.DEGRADED  # an outage: not ready again, unlike HasSynced
    assert not store.ready
    with pytest.raises(TimeoutError):
        await store.wait_until_ready(timeout=0.05)
    health.state = wk.WatchState.HEALTHY
    writer.apply(wk.Apply(cm("x")))
    await store.wait_until_ready(timeout=1)


class OwnSource:
    """An event source of the user's own, not a ``Watcher``, that reports its health."""

    def __init__(self, *evs: wk.Event) -> None:
        self.health = wk.WatchHealth(resource="own")
        self.evs = evs

    def __aiter__(self) -> AsyncIterator[wk.Event]:
        return events(*self.evs)


async def test_readiness_follows_any_source_that_has_health() -> None:
    """The reflector reads readiness from an explicit health object (``HasHealth``, or the
    ``health=`` argument), not from ``isinstance(Watcher)``."""
    source = OwnSource(wk.InitStart(), wk.InitApply(cm("a")), wk.InitDone())
    assert isinstance(source, wk.HasHealth)
    store, writer = wk.Store.new()
    source.health.state = wk.WatchState.DEGRADED
    await run_source(writer, source)
    assert len(store) == 1 and not store.ready, "listed, but its source is degraded"
    source.health.state = wk.WatchState.HEALTHY
    source.health._changed()
    assert store.ready

    store, writer = wk.Store.new()
    health = wk.WatchHealth(resource="given", state=wk.WatchState.DEGRADED)
    async for _ in wk.reflector(writer, events(wk.InitStart(), wk.InitDone()), health=health):
        pass
    assert not store.ready


async def run_source(writer: wk.Writer, source: OwnSource) -> None:
    async for _ in wk.reflector(writer, source):
        pass
