"""A sharded replica in one process against the simulator: it watches only its objects,
lets a draining object go only after its running reconcile ended (and never starts another),
and shows its ring and share in /readyz?verbose and /metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

import watchkeeper as wk
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.realtime

NS = "shard"
KEY, DRAIN = "shard.watchkeeper.io/w", "drain.watchkeeper.io/w"
TIMINGS = {"lease_duration": 1.0, "renew_deadline": 0.7, "retry_period": 0.2}


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}}}


def labels_of(srv: ApiServer, name: str) -> dict[str, str]:
    obj = srv.get_object("v1", "ConfigMap", name, namespace=NS)
    return dict(obj["metadata"].get("labels") or {})


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield server


async def test_a_draining_object_is_released_only_after_its_running_reconcile(
    srv: ApiServer,
) -> None:
    for name in ("slow", "fast"):
        srv.create_object(cm(name, {KEY: "me"}))
    srv.create_object(cm("theirs", {KEY: "other"}))
    srv.create_object(cm("nobodys"))
    starts: list[tuple[str, float]] = []
    release = asyncio.Event()
    in_slow = asyncio.Event()

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        loop = asyncio.get_running_loop()
        starts.append((wk.meta.name(obj), loop.time()))
        if wk.meta.name(obj) == "slow":
            in_slow.set()
            await release.wait()
            return wk.Action.requeue(0.0)  # at once: only the hold keeps it from running again
        return wk.Action.requeue(0.05)

    s = wk.Sharding(ring="w", replica_id="me", lease_namespace=NS, **TIMINGS)
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        controller = wk.Controller(api, wk.ControllerConfig(handle_signals=False), sharding=s)
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(reconcile, stop=stop))
        try:
            await asyncio.wait_for(in_slow.wait(), 10)
            await eventually(lambda: controller.store.ready)
            # Only this replica's objects are watched and cached.
            assert sorted(wk.meta.name(o) for o in controller.store.list()) == ["fast", "slow"]
            assert {n for n, _ in starts} == {"fast", "slow"}

            await api.patch("slow", {"metadata": {"labels": {DRAIN: "me"}}})  # the sharder
            asked = asyncio.get_running_loop().time()
            await asyncio.sleep(0.5)
            # Its reconcile still runs: the labels stay, so nobody else may take it.
            assert labels_of(srv, "slow") == {KEY: "me", DRAIN: "me"}
            assert controller.draining == 1
            release.set()
            await eventually(lambda: labels_of(srv, "slow") == {})
            await eventually(lambda: controller.store.get("slow", namespace=NS) is None
                             and controller.draining == 0)
            await asyncio.sleep(0.3)
            assert [t for n, t in starts if n == "slow" and t > asked] == []  # never again
            assert any(n == "fast" and t > asked for n, t in starts)  # the rest goes on
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)


async def test_run_shows_the_ring_and_the_share_in_readyz_and_metrics(srv: ApiServer) -> None:
    for i in range(12):
        srv.create_object(cm(f"w-{i}"))

    def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    s = wk.Sharding(ring="w", replica_id="solo", lease_namespace=NS, **TIMINGS)
    async with srv.client() as client:
        controller = wk.Controller(client.api("configmaps", namespace=NS), sharding=s)
        probes = wk.HealthServer()
        stop = asyncio.Event()
        task = asyncio.create_task(wk.run(wk.Operator(controller, reconcile), probes=probes,
                                          stop=stop, handle_signals=False))
        try:
            await eventually(lambda: len(controller.store) == 12)
            async with aiohttp.ClientSession() as http:
                async with http.get(probes.url + "/readyz?verbose") as resp:
                    detail = await resp.json()
                async with http.get(probes.url + "/metrics") as resp:
                    text = await resp.text()
            (ring,) = detail["shards"]
            assert ring["resource"] == "shard ring w" and detail["ready"] is True
            assert ring["live_shards"] == ["solo"] and ring["owned_objects"] == 12
            assert ring["sharder"] is True and ring["ready"] is True
            samples = {(x.name, tuple(sorted(x.labels.items()))): x.value
                       for f in text_string_to_metric_families(text) for x in f.samples}
            assert samples[("watchkeeper_shard_owned_objects",
                            (("ring", "w"), ("shard", "solo")))] == 12
            assert samples[("watchkeeper_shard_live_shards", (("ring", "w"),))] == 1
            assert samples[("watchkeeper_sharder", (("ring", "w"),))] == 1
            assert samples[("watchkeeper_sharder_label_writes_total",
                            (("kind", "assign"), ("ring", "w")))] == 12
            assert samples[("watchkeeper_sharder_write_failures_total", (("ring", "w"),))] == 0
            assert samples[("watchkeeper_sharder_dead_leases_deleted_total",
                            (("ring", "w"),))] == 0
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
        # Stopped: its lease was released after its reconciles ended (others need not wait).
        lease = srv.get_object("coordination.k8s.io/v1", "Lease", "w-shard-solo", namespace=NS)
        assert lease["spec"]["holderIdentity"] == ""


async def test_run_refuses_sharding_with_leader_election_or_reacquire(srv: ApiServer) -> None:
    async with srv.client() as client:
        s = wk.Sharding(ring="w", replica_id="me", lease_namespace=NS, **TIMINGS)
        c = wk.Controller(client.api("configmaps", namespace=NS), sharding=s)
        leases = client.api("leases.coordination.k8s.io", namespace=NS)
        with pytest.raises(ValueError, match="leader_election"):
            await wk.run(wk.Operator(c, lambda o, x: wk.Action.await_change()),
                         leader_election=wk.LeaderElector(leases, "x"), handle_signals=False)
        c2 = wk.Controller(client.api("configmaps", namespace=NS),
                           wk.ControllerConfig(on_leadership_lost="reacquire"), sharding=s)
        with pytest.raises(ValueError, match="exit"):
            await wk.run(wk.Operator(c2, lambda o, x: wk.Action.await_change()),
                         handle_signals=False)


async def test_the_sharder_labels_only_what_the_controller_selects(srv: ApiServer) -> None:
    """A controller that watches ``app=mine`` ConfigMaps: the sharder labels those and
    never writes to the others (it used to label every object of the resource)."""
    for i in range(6):
        srv.create_object(cm(f"mine-{i}", {"app": "mine"}))
    for i in range(4):
        srv.create_object(cm(f"other-{i}", {"app": "other"}))
    srv.create_object(cm("plain"))

    def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    s = wk.Sharding(ring="w", replica_id="solo", lease_namespace=NS, **TIMINGS)
    async with srv.client() as client:
        controller = wk.Controller(client.api("configmaps", namespace=NS), sharding=s,
                                   watch_config=wk.WatchConfig(label_selector="app=mine"))
        stop = asyncio.Event()
        task = asyncio.create_task(wk.run(wk.Operator(controller, reconcile), stop=stop,
                                          handle_signals=False))
        try:
            await eventually(lambda: len(controller.store) == 6)
            await asyncio.sleep(3 * TIMINGS["lease_duration"])  # the sharder had its chance
            assert all(labels_of(srv, f"mine-{i}").get(KEY) == "solo" for i in range(6))
            assert all(KEY not in labels_of(srv, f"other-{i}") for i in range(4))
            assert KEY not in labels_of(srv, "plain")
            assert srv.count(method="PATCH", path_prefix=f"/api/v1/namespaces/{NS}/configmaps/o")\
                == 0
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
