"""Predicates against the simulator: with ``wk.predicates.generation_changed`` a reconcile
that writes its object's status is not reconciled again because of its own write; a spec
change, a deletion and a relist still pass. And the filter's rules, exactly."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.controller.predicates import PredicateFilter
from watchkeeper_sim import ApiServer

NS = "default"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                  "listKind": "GizmoList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}
STATUS_WRITES = 5  # without the predicate the reconcile re-triggers itself this many times


def gizmo(name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gizmo",
            "metadata": {"name": name, "namespace": NS}, "spec": {"size": size}}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        server.create_object(CRD)
        yield server


async def run_status_writer(
    srv: ApiServer, predicate: wk.predicates.Predicate | None,
) -> tuple[Counter[str], list[int], wk.Controller]:
    """A reconcile that writes status on every call (a counter, so each write is a real
    change), up to STATUS_WRITES times; returns the calls after it settles, a spec change,
    and a settle again, and the generations the reconcile saw."""
    calls: Counter[str] = Counter()
    generations: list[int] = []
    srv.create_object(gizmo("g"))
    async with srv.client() as client:
        api = client.api("gizmos.example.com", namespace=NS)

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            calls[wk.meta.name(obj)] += 1
            generations.append(obj["metadata"]["generation"])
            if calls["g"] <= STATUS_WRITES:
                await api.patch_status("g", {"status": {"calls": calls["g"]}}, type="merge")
            return wk.Action.await_change()

        ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False),
                             predicate=predicate)
        stop = asyncio.Event()
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        try:
            await eventually(lambda: calls["g"] >= 1)
            await asyncio.sleep(1.0)  # time for any reconcile its own write triggers
            settled = calls["g"]
            live = await api.get("g")
            # the simulator, like kube-apiserver: a status write leaves the generation alone
            assert live["status"]["calls"] >= 1 and live["metadata"]["generation"] == 1
            calls["settled"] = settled
            await api.patch("g", {"spec": {"size": 2}}, type="merge")  # a spec change
            assert (await api.get("g"))["metadata"]["generation"] == 2
            await eventually(lambda: 2 in generations)
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    return calls, generations, ctrl


async def test_own_status_write_does_not_requeue_with_generation_changed(srv: ApiServer) -> None:
    calls, generations, ctrl = await run_status_writer(srv, wk.predicates.generation_changed)
    assert calls["settled"] == 1  # the reconcile's own status write did not trigger it again
    assert calls["g"] == 2 and generations == [1, 2]  # the spec change did, once
    assert ctrl.triggers[0].filter is not None and ctrl.triggers[0].filter.dropped >= 2


async def test_without_the_predicate_own_status_writes_requeue(srv: ApiServer) -> None:
    """The control: the same reconcile without the predicate re-triggers itself."""
    calls, generations, _ = await run_status_writer(srv, None)
    assert calls["settled"] == STATUS_WRITES + 1, calls  # each write triggered another one
    assert 2 in generations


async def test_deletion_and_a_configmap_still_pass(srv: ApiServer) -> None:
    """The start of a deletion passes (a finalizer must run) though the simulator does not
    bump the generation for it; an object without a generation always passes."""
    seen: list[tuple[str, bool]] = []
    async with srv.client() as client:
        api = client.api("gizmos.example.com", namespace=NS)
        cms = client.api("configmaps", namespace=NS)
        g = gizmo("g")
        g["metadata"]["finalizers"] = ["example.com/hold"]
        await api.create(g)
        await cms.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "c", "namespace": NS}, "data": {"n": "0"}})

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            seen.append((wk.meta.name(obj), bool(obj["metadata"].get("deletionTimestamp"))))
            return wk.Action.await_change()

        gizmos = wk.Controller(api, wk.ControllerConfig(handle_signals=False),
                               predicate=wk.predicates.generation_changed)
        configmaps = wk.Controller(cms, wk.ControllerConfig(handle_signals=False),
                                   predicate=wk.predicates.generation_changed)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(c.run(reconcile, stop=stop)) for c in (gizmos, configmaps)]
        try:
            await eventually(lambda: {("g", False), ("c", False)} <= set(seen))
            await api.patch("g", {"metadata": {"labels": {"a": "b"}}}, type="merge")
            await cms.patch("c", {"data": {"n": "1"}}, type="merge")
            await eventually(lambda: seen.count(("c", False)) == 2)
            await api.delete("g")
            await eventually(lambda: ("g", True) in seen)
            await api.patch("g", {"metadata": {"finalizers": None}}, type="merge")
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
    # the label change was dropped; the deletion passed; the ConfigMap change passed
    assert [s for s in seen if s[0] == "g"] == [("g", False), ("g", True)], seen
    assert seen.count(("c", False)) == 2


def obj(uid: str, generation: int | None, **metadata: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": uid, "namespace": NS, "uid": uid, **metadata}
    if generation is not None:
        md["generation"] = generation
    return {"metadata": md}


def test_the_filter_passes_new_changed_relisted_and_generationless_objects() -> None:
    f = PredicateFilter(wk.predicates.generation_changed)
    assert f.changed(obj("a", 1))  # first seen (ADDED)
    assert not f.changed(obj("a", 1, labels={"x": "y"}))  # same generation: dropped
    assert f.changed(obj("a", 2))  # the spec changed
    assert f.changed(obj("a", 2, deletionTimestamp="2026-01-01T00:00:00Z"))  # deletion
    f.forget(obj("a", 2))  # DELETED
    assert f.changed(obj("a", 2))  # re-created under the same uid: seen afresh
    assert f.changed(obj("b", None)) and f.changed(obj("b", None))  # no generation
    f.seen(obj("c", 3))  # one of a relist (passes whatever it is)
    assert not f.changed(obj("c", 3))
    f.reset()  # the next relist begins
    assert f.changed(obj("c", 3))
    assert f.dropped == 2


def test_any_changed_and_the_metadata_predicates() -> None:
    p = wk.predicates.any_changed(wk.predicates.generation_changed,
                                  wk.predicates.labels_changed)
    f = PredicateFilter(p)
    assert f.changed(obj("a", 1, labels={"x": "1"}))
    assert not f.changed(obj("a", 1, labels={"x": "1"}, annotations={"n": "1"}))
    assert f.changed(obj("a", 1, labels={"x": "2"}))  # a label change passes
    assert f.changed(obj("a", 2, labels={"x": "2"}))  # so does a spec change
    assert p(obj("b", None)) is None  # without a generation: always passes
    a = PredicateFilter(wk.predicates.annotations_changed)
    assert a.changed(obj("a", 1)) and not a.changed(obj("a", 5))
    assert a.changed(obj("a", 5, annotations={"n": "1"}))
    fin = PredicateFilter(wk.predicates.any_changed(wk.predicates.generation_changed,
                                                    wk.predicates.finalizers_changed))
    assert fin.changed(obj("a", 1)) and not fin.changed(obj("a", 1, labels={"x": "1"}))
    assert fin.changed(obj("a", 1, finalizers=["example.com/cleanup"]))  # wk.finalizer's write
