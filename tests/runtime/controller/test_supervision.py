"""Nothing dies silently: every kind of background task of a real controller (against the
simulator, virtual time) is made to fail, and the failure must be visible: a restart with
degraded health in /readyz, or ``run()`` raising with the task's name."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

import watchkeeper as wk
from watchkeeper._runner import run_operator
from watchkeeper.ops import HealthServer
from watchkeeper_sim import ApiServer

NS = "default"
pytestmark = pytest.mark.looptime


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": data}


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}}


async def eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


async def readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(url + "/readyz?verbose") as resp:
        return resp.status, await resp.json()


def config(**kw: Any) -> wk.ControllerConfig:
    return wk.ControllerConfig(handle_signals=False, **kw)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


class Crash(Exception):
    pass


async def stop_run(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_mapper_that_raises_is_logged_counted_and_the_trigger_goes_on(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        return wk.Action.await_change()

    def mapper(obj: dict[str, Any]) -> list[wk.ObjectRef]:
        # KeyError for a ConfigMap without it
        return [wk.ObjectRef(namespace=NS, name=obj["data"]["for"])]

    srv.create_object(secret("target"))
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("secrets", namespace=NS), config()).watches(
            client.api("configmaps", namespace=NS), mapper)
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: seen == ["target"])
        for i in range(50):
            srv.create_object(cm(f"bad{i}"))  # the mapper raises on each
        srv.create_object(cm("pointer", **{"for": "target"}))
        await eventually(lambda: seen == ["target", "target"])  # a later change still counts
        trigger = ctrl.triggers[1]
        assert trigger.mapper_errors.count == 50
        status, body = await readyz(probes.url)
        assert status == 200  # a skipped object is counted and logged, not a broken part
        (controller,) = body["controllers"]
        assert controller["mapper_errors"] == {"watches configmaps": 50}
        async with aiohttp.ClientSession() as http, http.get(probes.url + "/metrics") as resp:
            metrics = await resp.text()
        assert ('watchkeeper_mapper_errors_total{controller="secrets",'
                'trigger="watches configmaps"} 50.0') in metrics
        assert all(t.state is wk.supervisor.TaskState.RUNNING
                   for t in ctrl.supervisor.statuses())  # type: ignore[union-attr]
        await stop_run(task)
        await probes.stop()
    lines = [r.getMessage() for r in caplog.records
             if r.levelno >= logging.WARNING and "mapper" in r.getMessage()]
    # One line for the error, one reminder after 10 repeats: not 50 lines.
    assert len(lines) == 2, lines
    assert "KeyError" in lines[0] and "default/bad0" in lines[0]


async def test_a_crashed_trigger_feeder_restarts_with_degraded_health_in_readyz(
    srv: ApiServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        return wk.Action.await_change()

    srv.create_object(cm("a"))
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: seen == ["a"])
        trig = ctrl.triggers[0]
        real_refs = trig.refs

        def crash_once(obj: dict[str, Any]) -> list[wk.ObjectRef]:
            monkeypatch.setattr(trig, "refs", real_refs)
            raise Crash("injected feeder crash")

        monkeypatch.setattr(trig, "refs", crash_once)
        srv.create_object(cm("b"))
        await eventually(lambda: "trigger configmaps" in ctrl.health().problems)
        status, body = await readyz(probes.url)
        assert status == 503 and body["ready"] is False
        (controller,) = body["controllers"]
        why = controller["problems"]["trigger configmaps"]
        assert "Crash: injected feeder crash" in why
        (feeder,) = [t for t in controller["tasks"] if t["task"] == "trigger configmaps"]
        assert feeder["state"] == "degraded"
        # Restarted after its backoff: it relists, so "b" is reconciled after all.
        await eventually(lambda: "b" in seen)
        assert feeder["restarts"] == 0
        await eventually(lambda: ctrl.health().state is wk.WatchState.HEALTHY, timeout=30)
        status, body = await readyz(probes.url)
        assert status == 200
        (feeder,) = [t for t in body["controllers"][0]["tasks"]
                     if t["task"] == "trigger configmaps"]
        assert feeder["state"] == "running" and feeder["restarts"] == 1
        srv.create_object(cm("c"))  # and it keeps working
        await eventually(lambda: "c" in seen)
        await stop_run(task)
        await probes.stop()


async def test_a_crashed_worker_restarts_and_the_request_is_not_lost(
    srv: ApiServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(concurrency=1))
        probes = HealthServer().add_controller(ctrl)
        await probes.start()
        real = ctrl.workers.reconcile_one

        async def crash_once(*args: Any) -> wk.Action:
            monkeypatch.setattr(ctrl.workers, "reconcile_one", real)
            raise Crash("injected worker crash")

        monkeypatch.setattr(ctrl.workers, "reconcile_one", crash_once)
        task = asyncio.create_task(ctrl.run(reconcile))
        srv.create_object(cm("a"))
        await eventually(lambda: "worker 1" in ctrl.health().problems)
        status, body = await readyz(probes.url)
        assert status == 503
        assert "injected worker crash" in body["controllers"][0]["problems"]["worker 1"]
        await eventually(lambda: seen == ["a"])  # the crashed request ran again
        await eventually(lambda: ctrl.health().state is wk.WatchState.HEALTHY, timeout=30)
        assert (await readyz(probes.url))[0] == 200
        await stop_run(task)
        await probes.stop()


async def test_a_worker_crash_loop_past_max_unhealthy_ends_run_naming_it(
    srv: ApiServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             config(concurrency=1, max_unhealthy=60))

        async def always(*args: Any) -> wk.Action:
            raise Crash("worker bug")

        monkeypatch.setattr(ctrl.workers, "reconcile_one", always)
        srv.create_object(cm("a"))
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(wk.ControllerUnhealthy) as info:
            await ctrl.run(reconcile)
    assert info.value.trigger == "worker 1"
    assert "worker bug" in str(info.value) and "max_unhealthy 60 s" in str(info.value)
    assert 60 <= loop.time() - start <= 70


async def test_a_crashed_watchdog_ends_run_naming_it(
    srv: ApiServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(max_unhealthy=60))

        def broken(now: float | None = None) -> wk.controller.ControllerHealth:
            raise Crash("watchdog bug")

        monkeypatch.setattr(ctrl, "health", broken)
        with pytest.raises(wk.TaskDied) as info:
            await ctrl.run(reconcile)
    assert info.value.task == "watchdog"
    assert "watchdog" in str(info.value) and isinstance(info.value.__cause__, Crash)


class BrokenElector:
    """An elector (the Elector protocol) whose run() crashes before it ever leads."""

    def __init__(self) -> None:
        self.leading, self.lost = asyncio.Event(), asyncio.Event()

    async def run(self) -> None:
        await asyncio.sleep(3)
        raise Crash("elector bug")

    def reset(self) -> None:
        self.leading, self.lost = asyncio.Event(), asyncio.Event()


async def test_a_crashed_elector_ends_run_naming_it(srv: ApiServer) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        with pytest.raises(wk.TaskDied) as info:
            async with asyncio.timeout(60):  # before: run() waited for leadership forever
                await ctrl.run(reconcile, elector=BrokenElector())
    assert info.value.task == "leader elector"
    assert "elector bug" in str(info.value) and isinstance(info.value.__cause__, Crash)


async def test_a_probe_server_that_stops_listening_is_restarted_and_shows_degraded(
    srv: ApiServer,
) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        probes = HealthServer()
        await probes.start()
        op = wk.Operator(ctrl, reconcile)
        task = asyncio.create_task(run_operator(op, probes, probe_check_interval=1.0))
        await ctrl.store.wait_until_ready(timeout=10)
        assert (await readyz(probes.url))[0] == 200
        assert probes._sock is not None
        probes._sock.close()  # injected: the listening socket is gone
        body: dict[str, Any] = {}

        async def degraded() -> bool:
            nonlocal body
            try:
                status, body = await readyz(probes.url)
            except aiohttp.ClientConnectionError:
                return False
            return status == 503

        async with asyncio.timeout(30):
            while not await degraded():
                await asyncio.sleep(0.2)
        (run_sup,) = body["supervisors"]
        assert "probe server" in run_sup["problems"]
        assert "stopped listening" in run_sup["problems"]["probe server"]
        async with asyncio.timeout(30):  # stable again after 10 s
            while (await readyz(probes.url))[0] != 200:
                await asyncio.sleep(0.5)
        assert not task.done()
        await stop_run(task)
        await probes.stop()


async def test_a_probe_server_that_cannot_come_back_ends_the_run_naming_it(
    srv: ApiServer,
) -> None:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        return wk.Action.await_change()

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config())
        probes = HealthServer()
        await probes.start()
        task = asyncio.create_task(
            run_operator(wk.Operator(ctrl, reconcile), probes, probe_check_interval=1.0))
        await ctrl.store.wait_until_ready(timeout=10)
        assert probes._sock is not None
        probes._sock.close()
        # someone else took the port: the restarts cannot bind
        with socket.create_server(("127.0.0.1", probes.port)), pytest.raises(wk.TaskDied) as info:
            async with asyncio.timeout(120):
                await task
        await probes.stop()
    assert info.value.task == "probe server" and "gave up after 5 restarts" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


async def test_a_raising_watch_error_hook_or_error_policy_kills_nothing(
    srv: ApiServer,
) -> None:
    seen: list[str] = []
    policy_calls: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen.append(wk.meta.name(obj))
        if wk.meta.name(obj) == "bad":
            raise Crash("reconcile error")
        return wk.Action.await_change()

    def error_policy(obj: dict[str, Any], exc: BaseException, ctx: Any) -> wk.Action:
        policy_calls.append(wk.meta.name(obj))
        raise Crash("error policy bug")

    def hook(name: str, error: wk.ApiError) -> None:
        raise Crash("hook bug")

    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(concurrency=1))
        task = asyncio.create_task(ctrl.run(reconcile, error_policy, on_watch_error=hook))
        srv.create_object(cm("bad"))
        # the default policy takes over: retried after ~1 s, ~2 s, by the same worker
        await eventually(lambda: seen.count("bad") >= 3)
        assert len(policy_calls) >= 3
        await eventually(lambda: srv.open_watches > 0)
        srv.faults.refuse(count_refused=True)
        srv.reset_watches()
        await eventually(lambda: ctrl.triggers[0].hook_errors.count >= 2)
        srv.faults.clear()
        srv.create_object(cm("after"))
        await eventually(lambda: "after" in seen)  # the trigger and the worker live on
        assert ctrl.supervisor is not None
        assert all(s.restarts == 0 for s in ctrl.supervisor.statuses())
        await stop_run(task)
