"""The Controller against the simulator over real sockets."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"


def cm(name: str, owner: dict[str, Any] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Secret",
                                    "name": wk.meta.name(owner), "uid": wk.meta.uid(owner)}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


def config(**kw: Any) -> wk.ControllerConfig:
    return wk.ControllerConfig(handle_signals=False, **kw)


async def test_never_concurrent_per_object_and_a_burst_is_deduplicated(srv: ApiServer) -> None:
    for i in range(4):
        srv.create_object(cm(f"o{i}"))
    running: Counter[str] = Counter()
    max_running: dict[str, int] = defaultdict(int)
    overall: list[int] = []
    calls: Counter[str] = Counter()

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        name = wk.meta.name(obj)
        running[name] += 1
        max_running[name] = max(max_running[name], running[name])
        overall.append(sum(running.values()))
        calls[name] += 1
        await asyncio.sleep(0.05)
        running[name] -= 1
        return wk.Action.await_change()

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(api, config(concurrency=4))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: all(calls[f"o{i}"] >= 1 for i in range(4)))
        before = calls["o0"]
        for n in range(1000):
            await api.patch("o0", {"data": {"n": str(n)}})
        await eventually(lambda: ctrl.queue_depth == 0 and running["o0"] == 0)
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert max(max_running.values()) == 1  # never two reconciles of one object at once
    assert max(overall) > 1  # but different objects do run side by side
    burst = calls["o0"] - before
    assert 1 <= burst < 100, burst  # 1,000 changes, deduplicated to a handful of reconciles


@pytest.mark.looptime
async def test_a_failing_object_backs_off_on_schedule_while_others_proceed(
    srv: ApiServer,
) -> None:
    srv.create_object(cm("bad"))
    srv.create_object(cm("good"))
    loop = asyncio.get_running_loop()
    attempts: dict[str, list[float]] = defaultdict(list)

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts[wk.meta.name(obj)].append(loop.time())
        if wk.meta.name(obj) == "bad":
            raise RuntimeError("cannot reconcile bad")
        return wk.Action.await_change()

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(api, config())
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(attempts["bad"]) >= 7, timeout=200)
        # Meanwhile a change to another object is reconciled at once.
        start = loop.time()
        await api.patch("good", {"data": {"x": "1"}})
        await eventually(lambda: len(attempts["good"]) >= 2, timeout=5)
        assert attempts["good"][-1] - start < 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    gaps = [b - a for a, b in zip(attempts["bad"], attempts["bad"][1:], strict=False)]
    for n, gap in enumerate(gaps[:6]):
        d = 2.0**n  # 1, 2, 4, 8 ... seconds, +0-10 % jitter
        assert d - 0.002 <= gap <= d * 1.1 + 0.01, (n, gap)  # scheduler slack: 1 ms
    assert ctrl.results["error"] >= 7


@pytest.mark.looptime
async def test_success_resets_the_objects_backoff(srv: ApiServer) -> None:
    srv.create_object(cm("flaky"))
    loop = asyncio.get_running_loop()
    times: list[float] = []
    fail = {"on": True}

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        times.append(loop.time())
        if fail["on"]:
            raise RuntimeError("transient")
        return wk.Action.requeue(100)

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(times) >= 6, timeout=200)  # backoff now at 32 s
        fail["on"] = False
        await eventually(lambda: len(times) >= 7, timeout=200)  # succeeds, requeues in 100 s
        fail["on"] = True
        await eventually(lambda: len(times) >= 9, timeout=300)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert times[7] - times[6] == pytest.approx(100, abs=0.1)
    assert 0.998 <= times[8] - times[7] <= 1.1 + 0.01  # back to the first step


async def test_owned_child_changes_trigger_the_owner(srv: ApiServer) -> None:
    reconciled: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        reconciled.append(wk.meta.name(obj))
        return wk.Action.await_change()

    async with srv.client() as client:
        secrets = client.api("secrets", namespace=NS)
        owner = await secrets.create(secret("parent"))
        ctrl = wk.Controller(secrets, config()).owns(client.api("configmaps", namespace=NS))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: reconciled.count("parent") >= 1)
        srv.create_object(cm("child", owner=owner))
        await eventually(lambda: reconciled.count("parent") >= 2)
        srv.delete_object("v1", "ConfigMap", "child")
        await eventually(lambda: reconciled.count("parent") >= 3)
        srv.create_object(cm("unrelated"))
        await asyncio.sleep(0.3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert reconciled.count("parent") == 3


async def test_watches_relation_maps_any_object_to_requests(srv: ApiServer) -> None:
    seen: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        return wk.Action.await_change()

    async with srv.client() as client:
        srv.create_object(secret("target"))
        ctrl = wk.Controller(client.api("secrets", namespace=NS), config()).watches(
            client.api("configmaps", namespace=NS),
            lambda o: [wk.ObjectRef(namespace=NS, name=o["data"]["for"])]
            if "for" in o.get("data", {}) else [],
        )
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: seen == ["target"])
        srv.create_object(cm("pointer", **{"for": "target"}))
        await eventually(lambda: seen == ["target", "target"])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_rbac_loss_on_the_child_is_reported_by_name_and_the_parent_keeps_working(
    srv: ApiServer,
) -> None:
    srv.add_user("op")
    srv.rbac.grant("op", verbs=["get", "list", "watch"], resources=["secrets"])
    srv.rbac.grant("op", verbs=["get", "list", "watch"], resources=["configmaps"])
    reported: list[tuple[str, str]] = []
    seen: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        return wk.Action.await_change()

    async with srv.client("op") as client:
        ctrl = wk.Controller(client.api("secrets", namespace=NS), config()).owns(
            client.api("configmaps", namespace=NS),
            backoff=wk.ConstantBackoff(0.2),
        )
        task = asyncio.create_task(ctrl.run(
            reconcile, on_watch_error=lambda name, err: reported.append((name, type(err).__name__))
        ))
        await eventually(lambda: all(t.store.ready for t in ctrl.triggers))
        await eventually(lambda: srv.open_watches == 2)
        srv.rbac.revoke("op", resources=["configmaps"])
        srv.reset_watches()
        await eventually(lambda: ("owns configmaps", "Forbidden") in reported)
        assert ctrl.health().state is wk.WatchState.DEGRADED
        assert "owns configmaps" in ctrl.health().problems
        srv.create_object(secret("while-child-broken"))  # the parent trigger still works
        await eventually(lambda: "while-child-broken" in seen)
        srv.rbac.grant("op", verbs=["get", "list", "watch"], resources=["configmaps"])
        await eventually(lambda: ctrl.health().state is wk.WatchState.HEALTHY, timeout=30)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.looptime
async def test_max_unhealthy_makes_run_raise_naming_the_trigger(srv: ApiServer) -> None:
    srv.add_user("op")
    srv.rbac.grant("op", verbs=["get", "list", "watch"], resources=["secrets"])
    loop = asyncio.get_running_loop()

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client("op") as client:
        ctrl = wk.Controller(client.api("secrets", namespace=NS),
                             config(max_unhealthy=120)).owns(client.api("configmaps", namespace=NS))
        start = loop.time()
        with pytest.raises(wk.ControllerUnhealthy) as info:
            await ctrl.run(reconcile)
    assert info.value.trigger == "owns configmaps"
    assert "owns configmaps" in str(info.value) and "forbidden" in str(info.value)
    assert isinstance(info.value.__cause__, wk.WatcherUnhealthy)
    assert loop.time() - start == pytest.approx(120, abs=1)


@pytest.mark.looptime
async def test_store_ready_goes_false_during_an_outage_and_true_after(srv: ApiServer) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(max_unhealthy=None))
        task = asyncio.create_task(ctrl.run(reconcile))
        await ctrl.store.wait_until_ready(timeout=10)
        await eventually(lambda: srv.open_watches > 0)
        srv.faults.refuse(count_refused=True)
        srv.reset_watches()
        await eventually(lambda: not ctrl.store.ready, timeout=10)
        await asyncio.sleep(30)
        assert not ctrl.store.ready
        srv.faults.clear()
        await ctrl.store.wait_until_ready(timeout=120)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_stop_drains_in_flight_reconciles(srv: ApiServer) -> None:
    srv.create_object(cm("slow"))
    done: list[str] = []
    started = asyncio.Event()

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        started.set()
        await asyncio.sleep(0.5)
        done.append(wk.meta.name(obj))
        return wk.Action.await_change()

    stop = asyncio.Event()
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(shutdown_timeout=5))
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        await started.wait()
        stop.set()
        await asyncio.wait_for(task, 5)
    assert done == ["slow"]  # finished, not cancelled
    assert srv.open_watches == 0


async def test_shutdown_timeout_cancels_what_does_not_finish(srv: ApiServer) -> None:
    srv.create_object(cm("stuck"))
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return wk.Action.await_change()

    stop = asyncio.Event()
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             config(shutdown_timeout=0.3))
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        await started.wait()
        stop.set()
        await asyncio.wait_for(task, 5)
    assert cancelled == [True]


def test_controller_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        wk.ControllerConfig(concurrency=0)
    with pytest.raises(ValueError, match="max_unhealthy"):
        wk.ControllerConfig(max_unhealthy=0)
    with pytest.raises(ValueError, match="failure_window"):
        wk.ControllerConfig(failure_window=0)
    with pytest.raises(ValueError, match="failure_min_attempts"):
        wk.ControllerConfig(failure_min_attempts=0)
    with pytest.raises(ValueError, match="requeue delay"):
        wk.Action.requeue(-1)


async def test_cpu_only_reconciles_do_not_starve_the_event_loop(srv: ApiServer) -> None:
    for i in range(300):
        srv.create_object(cm(f"busy{i}"))
    loop = asyncio.get_running_loop()
    count = {"n": 0}

    def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:  # sync, never awaits
        end = time.perf_counter() + 0.0005
        while time.perf_counter() < end:
            pass
        count["n"] += 1
        return wk.Action.await_change()

    worst = 0.0

    async def probe() -> None:
        nonlocal worst
        while True:
            t = loop.time()
            await asyncio.sleep(0.001)
            worst = max(worst, loop.time() - t)

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        task = asyncio.create_task(ctrl.run(reconcile))
        await ctrl.store.wait_until_ready(timeout=10)
        watcher = asyncio.create_task(probe())
        await eventually(lambda: count["n"] >= 300)
        watcher.cancel()
        task.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    assert worst < 0.05, worst  # 300 reconciles x 0.5 ms would be a 150 ms stall without yields


@pytest.mark.looptime
async def test_debounce_merges_a_burst_into_one_reconcile(srv: ApiServer) -> None:
    srv.create_object(cm("bursty"))
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        times.append(loop.time())
        return wk.Action.await_change()

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(api, config(debounce=5))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(times) == 1, timeout=30)
        burst_start = loop.time()
        for n in range(10):
            await api.patch("bursty", {"data": {"n": str(n)}})
            await asyncio.sleep(0.2)
        await asyncio.sleep(10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(times) == 2  # ten changes in 2 s, one reconcile
    assert times[1] - burst_start == pytest.approx(5, abs=0.5)  # 5 s after the first change


@pytest.mark.looptime
async def test_rate_limit_bounds_reconciles_per_second(srv: ApiServer) -> None:
    for i in range(20):
        srv.create_object(cm(f"r{i}"))
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        times.append(loop.time())
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             config(rate_limit=2, concurrency=4))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(times) == 20, timeout=60)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    span = times[-1] - times[0]
    assert 9 <= span <= 10.5, span  # 20 reconciles at 2/s: about 9.5 s, not all at once
