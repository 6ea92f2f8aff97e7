"""``finalizer()`` against the simulator: under a real Controller (cleanup runs once per
deletion, and an object already gone when the finalizer is removed is a success), and
called directly, path by path (add, apply, cleanup then remove, nothing left to do, the
conflict retries of the removal)."""

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


# -- finalizer() called directly: each path, exactly ------------------------------------------

OTHER = "other.example.com/keep"


async def handlers() -> tuple[Counter[str], Callable[..., Any], Callable[..., Any]]:
    calls: Counter[str] = Counter()

    def apply_fn(obj: dict[str, Any]) -> wk.Action:
        calls["apply"] += 1
        return wk.Action.requeue(7)

    async def cleanup_fn(obj: dict[str, Any]) -> wk.Action:
        calls["cleanup"] += 1
        calls[f"cleanup saw finalizers {obj['metadata'].get('finalizers')}"] += 1
        return wk.Action.requeue(3)

    return calls, apply_fn, cleanup_fn


def with_finalizers(name: str, *finalizers: str) -> dict[str, Any]:
    obj = cm(name)
    obj["metadata"]["finalizers"] = list(finalizers)
    return obj


async def test_the_first_call_adds_the_finalizer_and_applies_nothing(srv: ApiServer) -> None:
    calls, apply_fn, cleanup_fn = await handlers()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        bare = await api.create(cm("bare"))  # no finalizers field at all
        other = await api.create(with_finalizers("other", OTHER))
        for obj in (bare, other):
            action = await wk.finalizer(api, FINALIZER, obj, apply_fn, cleanup_fn)
            assert action == wk.Action.await_change()  # the update triggers the next one
        assert (await api.get("bare"))["metadata"]["finalizers"] == [FINALIZER]
        assert (await api.get("other"))["metadata"]["finalizers"] == [OTHER, FINALIZER]
        assert calls == {}  # apply runs only once the finalizer is in place
        live = await api.get("bare")
        assert await wk.finalizer(api, FINALIZER, live, apply_fn, cleanup_fn) == (
            wk.Action.requeue(7))  # apply's own Action
        assert calls == {"apply": 1}


async def test_adding_to_a_list_changed_meanwhile_fails_instead_of_clobbering_it(
    srv: ApiServer,
) -> None:
    calls, apply_fn, cleanup_fn = await handlers()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        stale = await api.create(with_finalizers("obj", OTHER))
        await api.patch("obj", {"metadata": {"finalizers": [OTHER, "third.example.com/x"]}},
                        type="merge")  # another controller added its own
        with pytest.raises((wk.Invalid, wk.Conflict)):  # the JSON patch's test failed
            await wk.finalizer(api, FINALIZER, stale, apply_fn, cleanup_fn)
        assert (await api.get("obj"))["metadata"]["finalizers"] == [
            OTHER, "third.example.com/x"]  # nothing lost; the retry reads the new list
        assert calls == {}


async def test_on_deletion_cleanup_runs_on_the_live_object_then_ours_goes(
    srv: ApiServer,
) -> None:
    calls, apply_fn, cleanup_fn = await handlers()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        await api.create(with_finalizers("last", FINALIZER))
        await api.create(with_finalizers("shared", FINALIZER, OTHER))
        for name in ("last", "shared"):
            await api.delete(name)
            deleting = await api.get(name)
            assert await wk.finalizer(api, FINALIZER, deleting, apply_fn, cleanup_fn) == (
                wk.Action.requeue(3))  # cleanup's own Action
        assert calls == {"cleanup": 2, f"cleanup saw finalizers {[FINALIZER]}": 1,
                         f"cleanup saw finalizers {[FINALIZER, OTHER]}": 1}
        assert [wk.meta.name(o) for o in (await api.list()).items] == ["shared"]
        assert (await api.get("shared"))["metadata"]["finalizers"] == [OTHER]  # left alone


async def test_on_deletion_nothing_runs_when_there_is_nothing_left_to_do(
    srv: ApiServer,
) -> None:
    """Ours never added, or already removed while the cache lags, the object gone, or
    deleted and re-created under the same name: no cleanup, no write."""
    calls, apply_fn, cleanup_fn = await handlers()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        await api.create(with_finalizers("never", OTHER))
        await api.delete("never")
        never = await api.get("never")
        await api.create(with_finalizers("lagging", FINALIZER, OTHER))
        await api.delete("lagging")
        lagging = await api.get("lagging")  # the cache's copy, still with ours ...
        await api.patch("lagging", {"metadata": {"finalizers": [OTHER]}}, type="merge")
        await api.create(with_finalizers("gone", FINALIZER))
        await api.delete("gone")
        gone = await api.get("gone")
        await api.patch("gone", {"metadata": {"finalizers": None}}, type="merge")
        await api.create(with_finalizers("reborn", FINALIZER))
        await api.delete("reborn")
        old = await api.get("reborn")
        await api.patch("reborn", {"metadata": {"finalizers": None}}, type="merge")
        await api.create(with_finalizers("reborn", FINALIZER))  # a new uid
        for obj in (never, lagging, gone, old):
            assert await wk.finalizer(api, FINALIZER, obj, apply_fn, cleanup_fn) == (
                wk.Action.await_change())
        assert calls == {}
        assert (await api.get("reborn"))["metadata"]["finalizers"] == [FINALIZER]  # untouched


@pytest.mark.parametrize(("conflicts", "removed"), [(4, True), (5, False)])
async def test_removal_retries_a_conflict_up_to_five_attempts_without_a_second_cleanup(
    srv: ApiServer, conflicts: int, removed: bool,
) -> None:
    calls, apply_fn, cleanup_fn = await handlers()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        await api.create(with_finalizers("obj", FINALIZER, OTHER))
        await api.delete("obj")
        deleting = await api.get("obj")
        srv.faults.error(409, "the object has been modified", method="PATCH",
                         path_prefix="/api/v1/namespaces/default/configmaps/obj",
                         count=conflicts)
        if removed:
            await wk.finalizer(api, FINALIZER, deleting, apply_fn, cleanup_fn)
        else:
            with pytest.raises(wk.Conflict):  # a reconcile error: retried with backoff
                await wk.finalizer(api, FINALIZER, deleting, apply_fn, cleanup_fn)
        assert calls["cleanup"] == 1  # the retries only re-read and remove
        finalizers = (await api.get("obj"))["metadata"]["finalizers"]
        assert finalizers == ([OTHER] if removed else [FINALIZER, OTHER])


async def test_a_handler_must_return_an_action(srv: ApiServer) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        obj = await api.create(with_finalizers("obj", FINALIZER))
        with pytest.raises(TypeError, match="must return an Action, not NoneType"):
            await wk.finalizer(api, FINALIZER, obj, lambda o: None,  # type: ignore[arg-type,return-value]
                               lambda o: wk.Action.await_change())
