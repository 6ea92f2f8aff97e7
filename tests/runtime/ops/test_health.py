"""Probes and metrics over HTTP, through an outage (virtual time)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

import watchkeeper as wk
from watchkeeper.ops import HealthServer
from watchkeeper_sim import ApiServer

NS = "default"


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as resp:
        return resp.status, await resp.text()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def eventually(check: Any, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.25)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        for i in range(3):
            server.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": f"cm{i}", "namespace": NS}})
        yield server


@pytest.mark.looptime
async def test_probes_follow_an_outage_and_recover(srv: ApiServer) -> None:
    """/readyz fails at once with the reason, /healthz only past max_unhealthy, both recover.

    The watcher itself retries forever here (max_unhealthy=None) and the probe applies the
    threshold: the deployment style where the kubelet restarts the pod via liveness."""
    async with srv.client() as client:
        w = wk.watcher(client.api("configmaps", namespace=NS), wk.WatchConfig(max_unhealthy=None))
        store, writer = wk.Store.new()
        probes = HealthServer().add_watch(w.health, store, max_unhealthy=60)
        await probes.start()

        async def consume() -> None:
            async for _ev in wk.reflector(writer, w):
                pass

        task = asyncio.create_task(consume())
        loop = asyncio.get_running_loop()
        async with aiohttp.ClientSession() as http:
            await store.wait_until_ready(timeout=10)
            assert (await get(http, probes.url + "/readyz"))[0] == 200
            assert (await get(http, probes.url + "/healthz")) == (200, "ok\n")
            while not srv.open_watches:
                await asyncio.sleep(0.1)
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            started = loop.time()

            async def not_ready() -> bool:
                return (await get(http, probes.url + "/readyz"))[0] == 503

            await eventually(not_ready, 5)
            _, body = await get(http, probes.url + "/readyz")
            assert "configmaps in default: degraded" in body and "ConnectionFailed" not in body
            assert "connection" in body  # the reason is there for a person to read
            assert (await get(http, probes.url + "/healthz"))[0] == 200  # not yet past 60 s

            async def dead() -> bool:
                return (await get(http, probes.url + "/healthz"))[0] == 503

            await eventually(dead, 120)
            assert loop.time() - started >= 60
            _, body = await get(http, probes.url + "/healthz")
            assert "max_unhealthy 60 s" in body

            srv.faults.clear()

            async def alive_and_ready() -> bool:
                return ((await get(http, probes.url + "/healthz"))[0] == 200
                        and (await get(http, probes.url + "/readyz"))[0] == 200)

            await eventually(alive_and_ready, 120)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await probes.stop()


@pytest.mark.looptime
async def test_readyz_verbose_is_json_with_each_watch(srv: ApiServer) -> None:
    async with srv.client() as client:
        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            return wk.Action.await_change()

        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             wk.ControllerConfig(handle_signals=False))
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        await ctrl.store.wait_until_ready(timeout=10)
        async with aiohttp.ClientSession() as http, http.get(
            probes.url + "/readyz?verbose"
        ) as resp:
            body = await resp.json()
        assert resp.status == 200 and body["ready"] is True
        (watch,) = body["watches"]
        assert watch["resource"] == "configmaps" and watch["state"] == "healthy"
        assert watch["objects"] == 3 and watch["last_error"] is None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await probes.stop()


@pytest.mark.looptime
async def test_metrics_change_as_documented(srv: ApiServer) -> None:
    async with srv.client() as client:
        calls = {"n": 0}

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            calls["n"] += 1
            if wk.meta.name(obj) == "cm0":
                raise RuntimeError("always fails")
            return wk.Action.await_change()

        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             wk.ControllerConfig(handle_signals=False, max_unhealthy=None))
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        await ctrl.store.wait_until_ready(timeout=10)
        await asyncio.sleep(5)
        async with aiohttp.ClientSession() as http:
            _, text = await get(http, probes.url + "/metrics")
            m = samples(text)
            r = (("resource", "configmaps"),)
            assert m[("watchkeeper_watch_state", r)] == 1
            assert m[("watchkeeper_store_objects", r)] == 3
            assert m[("watchkeeper_watch_relists_total", r)] == 1
            c = (("controller", "configmaps"),)
            assert m[("watchkeeper_reconcile_total", (*c, ("result", "success")))] == 2
            assert m[("watchkeeper_reconcile_total", (*c, ("result", "error")))] >= 2
            assert m[("watchkeeper_reconcile_duration_seconds_count", c)] >= 4
            assert ("watchkeeper_queue_depth", c) in m

            while not srv.open_watches:
                await asyncio.sleep(0.1)
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            await asyncio.sleep(10)
            m = samples((await get(http, probes.url + "/metrics"))[1])
            assert m[("watchkeeper_watch_state", r)] == 2
            assert m[("watchkeeper_watch_errors_total",
                      (("reason", "ConnectionFailed"), *r))] >= 2
            assert m[("watchkeeper_backoff_seconds", r)] > 0
            assert m[("watchkeeper_watch_restarts_total", r)] >= 1
            srv.faults.clear()
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "cm9", "namespace": NS}})
            await ctrl.store.wait_until_ready(timeout=60)
            await asyncio.sleep(1)
            m = samples((await get(http, probes.url + "/metrics"))[1])
            assert m[("watchkeeper_watch_state", r)] == 1
            assert m[("watchkeeper_watch_events_total", (*r, ("type", "ADDED")))] >= 1
            assert m[("watchkeeper_store_objects", r)] == 4
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await probes.stop()


@pytest.mark.looptime
async def test_readiness_fails_when_every_reconcile_fails_and_says_why(
    srv: ApiServer, capsys: pytest.CaptureFixture[str],
) -> None:
    """RBAC revoked for the children: every reconcile fails with 403. /readyz (and
    `watchkeeper status`) must say so by the documented rule, and recover by itself."""
    from watchkeeper.ops.status import print_status

    srv.add_user("op")
    srv.rbac.grant("op", verbs=["get", "list", "watch"], resources=["secrets", "configmaps"])
    write = srv.rbac.grant("op", verbs=["create", "update", "patch"], resources=["configmaps"])
    for name in ("s1", "s2", "s3"):
        srv.create_object({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": name, "namespace": NS}})
    loop = asyncio.get_running_loop()

    async with srv.client("op") as client:
        cms = client.api("configmaps", namespace=NS)

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            child = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": f"child-{wk.meta.name(obj)}", "namespace": NS},
                     "data": {"at": str(int(loop.time()))}}
            try:
                await cms.create(child)
            except wk.AlreadyExists:
                await cms.patch(wk.meta.name(child), {"data": child["data"]}, type="merge")
            return wk.Action.requeue(20)

        ctrl = wk.Controller(
            client.api("secrets", namespace=NS),
            wk.ControllerConfig(handle_signals=False, max_unhealthy=None, failure_window=120,
                                failure_min_attempts=5),
        ).owns(cms)
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        async with aiohttp.ClientSession() as http:
            async def ready() -> bool:
                return (await get(http, probes.url + "/readyz"))[0] == 200

            await eventually(ready, 30)
            async def reconciled() -> bool:
                return ctrl.results["success"] + ctrl.results["requeue"] >= 3

            await eventually(reconciled, 30)
            srv.rbac.revoke("op", write)
            revoked = loop.time()
            await asyncio.sleep(60)
            # Failing for 60 s, but a reconcile succeeded within the 120 s window: ready.
            assert ctrl.results["error"] >= 5
            assert (await get(http, probes.url + "/readyz"))[0] == 200

            async def not_ready() -> bool:
                return (await get(http, probes.url + "/readyz"))[0] == 503

            await eventually(not_ready, 120)
            assert loop.time() - revoked >= 100  # the window counts from the last success
            status, text = await get(http, probes.url + "/readyz")
            assert status == 503
            assert "[-] controller secrets: reconciles failing: every reconcile failed" in text
            assert (await get(http, probes.url + "/healthz"))[0] == 200  # readiness only

            async with http.get(probes.url + "/readyz?verbose") as resp:
                body = await resp.json()
            (c,) = body["controllers"]
            assert c["ready"] is False and c["state"] == "degraded"
            assert c["reconciles"]["error"] >= 5 and c["reconciles"]["requeue"] >= 3
            assert c["last_error"].startswith("Forbidden: ") and "configmaps" in c["last_error"]
            assert c["last_error_object"] in {"default/s1", "default/s2", "default/s3"}
            assert {f["object"] for f in c["failing"]} == {"default/s1", "default/s2",
                                                           "default/s3"}
            assert c["failing_objects"] == 3 and all(f["failures"] >= 2 for f in c["failing"])
            m = samples((await get(http, probes.url + "/metrics"))[1])
            assert m[("watchkeeper_reconcile_failing_objects",
                      (("controller", "secrets"),))] == 3

            assert await print_status(probes.url) == 1
            out = capsys.readouterr().out
            assert "NOT READY" in out and "controller secrets" in out
            assert "Forbidden" in out and "failing objects" in out and "default/s1" in out

            srv.rbac.grant("op", verbs=["create", "update", "patch"], resources=["configmaps"])
            await eventually(ready, 300)  # the first success makes it ready again
            async with http.get(probes.url + "/readyz?verbose") as resp:
                body = await resp.json()
            assert body["controllers"][0]["problems"] == {}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await probes.stop()


@pytest.mark.looptime
async def test_a_stuck_reconcile_fails_readiness_then_liveness_then_ends_run(
    srv: ApiServer,
) -> None:
    """One rule, computed in one place (Controller.health): stuck past reconcile_timeout
    -> not ready; past reconcile_timeout + max_unhealthy -> not alive and run() raises."""
    loop = asyncio.get_running_loop()
    started: dict[str, float] = {}

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        if wk.meta.name(obj) == "cm1":
            started["cm1"] = loop.time()
            await asyncio.Event().wait()  # hangs
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             wk.ControllerConfig(handle_signals=False, reconcile_timeout=10,
                                                 max_unhealthy=30, shutdown_timeout=1))
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        async with aiohttp.ClientSession() as http:
            while "cm1" not in started:
                await asyncio.sleep(0.1)
            await asyncio.sleep(started["cm1"] + 9 - loop.time())
            assert (await get(http, probes.url + "/readyz"))[0] == 200
            await asyncio.sleep(2)  # 11 s: stuck
            status, text = await get(http, probes.url + "/readyz")
            assert status == 503
            assert "reconcile of default/cm1 has been running for 11 s" in text
            async with http.get(probes.url + "/readyz?verbose") as resp:
                (c,) = (await resp.json())["controllers"]
            (stuck,) = c["stuck"]
            assert stuck == {"object": "default/cm1", "running_for": pytest.approx(11, abs=0.5)}
            assert (await get(http, probes.url + "/healthz"))[0] == 200
            await asyncio.sleep(started["cm1"] + 41 - loop.time())  # past 10 + 30 s
            status, text = await get(http, probes.url + "/healthz")
            assert status == 503 and "reconcile_timeout 10 s + max_unhealthy 30 s" in text
        with pytest.raises(wk.ControllerUnhealthy) as info:
            await asyncio.wait_for(task, 10)
        assert info.value.trigger == "reconcile" and "default/cm1" in str(info.value)
        await probes.stop()
