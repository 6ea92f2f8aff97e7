"""``finalizer()`` under a real Controller against the simulator: cleanup runs once per
deletion, and an object already gone when the finalizer is removed is a success."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import watchkeeper as wk
from watchkeeper.ops.metrics import Sources, WatchkeeperCollector
from watchkeeper_sim import ApiServer

NS = "default"
FINALIZER = "example.com/cleanup"


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": {"a": "1"}}


def child(owner: dict[str, Any]) -> dict[str, Any]:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": wk.meta.name(owner),
           "uid": wk.meta.uid(owner)}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"child-{wk.meta.name(owner)}", "namespace": NS,
                         "ownerReferences": [ref]}}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


def reconcile_metric(ctrl: wk.Controller, result: str) -> float:
    """What /metrics would say (the same collector the probe server serves)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchkeeperCollector(Sources(controllers=[ctrl])))
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if s.name == "watchkeeper_reconcile_total" and s.labels.get("result") == result:
                return s.value
    return 0.0


async def test_cleanup_runs_once_per_delete_and_a_gone_object_is_success(
    srv: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The usual pattern (examples/widget_operator.py): the cleanup deletes an owned child,
    and that child's deletion triggers the owner again while its first cleanup is running."""
    names = [f"obj{i}" for i in range(5)]
    for name in names:
        srv.create_object(child(srv.create_object(cm(name))))
    applied: Counter[str] = Counter()
    cleaned: Counter[str] = Counter()

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)

        def apply_fn(obj: dict[str, Any]) -> wk.Action:
            applied[wk.meta.name(obj)] += 1
            return wk.Action.await_change()

        secrets = client.api("secrets", namespace=NS)

        async def cleanup_fn(obj: dict[str, Any]) -> wk.Action:
            cleaned[wk.meta.name(obj)] += 1
            with contextlib.suppress(wk.NotFound):  # idempotent, as the guide asks
                await secrets.delete(f"child-{wk.meta.name(obj)}")
            await asyncio.sleep(0.2)  # more work: the child's Delete event arrives meanwhile
            return wk.Action.await_change()

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            return await wk.finalizer(api, FINALIZER, obj, apply_fn, cleanup_fn)

        ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False)).owns(secrets)
        stop = asyncio.Event()
        caplog.set_level(logging.WARNING, logger="watchkeeper")
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        try:
            await eventually(lambda: all(applied[n] >= 1 for n in names))
            for name in names:
                live = await api.get(name)
                assert live["metadata"]["finalizers"] == [FINALIZER]
                await api.delete(name)
            async with asyncio.timeout(20):
                while (await api.list()).items:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # any second reconcile of a deletion would run by now
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    assert cleaned == dict.fromkeys(names, 1), cleaned  # exactly once per deletion
    assert ctrl.results["error"] == 0, ctrl.results
    assert reconcile_metric(ctrl, "error") == 0
    assert reconcile_metric(ctrl, "success") >= 2 * len(names)  # the metric is really read
    failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert not failed, failed


@pytest.mark.parametrize("meanwhile", ["admin-clears-finalizers", "other-finalizer-removed"])
async def test_finalizer_list_changed_during_cleanup(
    srv: ApiServer, caplog: pytest.LogCaptureFixture, meanwhile: str
) -> None:
    """While the cleanup runs, someone else writes the finalizer list: an admin clears it
    (`kubectl patch ... finalizers: null`, the object goes: removing ours answers 404), or
    another controller removes its own (our ``test`` fails: 422). Neither is a failed
    reconcile, and the cleanup is not run again."""
    other = "other.example.com/keep"
    srv.create_object(cm("obj"))
    cleaned: Counter[str] = Counter()

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)

        async def cleanup_fn(obj: dict[str, Any]) -> wk.Action:
            cleaned[wk.meta.name(obj)] += 1
            live = await api.get("obj")
            keep = [] if meanwhile == "admin-clears-finalizers" else [FINALIZER]
            assert other in live["metadata"]["finalizers"]
            await api.patch("obj", {"metadata": {"finalizers": keep or None}}, type="merge")
            return wk.Action.await_change()

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            return await wk.finalizer(api, FINALIZER, obj, lambda o: wk.Action.await_change(),
                                      cleanup_fn)

        ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False))
        stop = asyncio.Event()
        caplog.set_level(logging.WARNING, logger="watchkeeper")
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        try:
            await eventually(lambda: FINALIZER in (ctrl.store.get("obj", namespace=NS) or {}).get(
                "metadata", {}).get("finalizers", []))
            live = await api.get("obj")
            await api.patch("obj", {"metadata": {"finalizers": [*live["metadata"]["finalizers"],
                                                                 other]}}, type="merge")
            await api.delete("obj")
            await eventually(lambda: cleaned["obj"] >= 1)
            async with asyncio.timeout(20):  # both ways, the last finalizer goes: deleted
                while (await api.list()).items:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    assert cleaned == {"obj": 1}, cleaned
    assert ctrl.results["error"] == 0, ctrl.results
    failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert not failed, failed
