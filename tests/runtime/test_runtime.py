"""``watchkeeper.run``, the composition root, against the simulator (virtual time where it
helps): several controllers stop together and drain concurrently, a failure in one drains
the others, signals are handled in this one place, and one lease serves them all."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        server.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "cm", "namespace": NS}})
        server.create_object({"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": "sec", "namespace": NS}})
        yield server


class Spans:
    """(kind, start, end, finished) of every reconcile, cancelled ones included."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float, bool]] = []
        self.started: set[str] = set()

    def reconciler(self, kind: str, seconds: float) -> Any:
        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            loop = asyncio.get_running_loop()
            start, finished = loop.time(), False
            self.started.add(kind)
            try:
                await asyncio.sleep(seconds)
                finished = True
            finally:
                self.spans.append((kind, start, loop.time(), finished))
            return wk.Action.await_change()
        return reconcile

    async def until_started(self, *kinds: str) -> None:
        async with asyncio.timeout(20):
            while not set(kinds) <= self.started:
                await asyncio.sleep(0.05)


def operators(client: wk.Client, spans: Spans, cm: tuple[float, float],
              sec: tuple[float, float], **config: Any) -> list[wk.Operator]:
    """A ConfigMap and a Secret operator: (reconcile seconds, shutdown_timeout) each."""
    return [
        wk.Operator(wk.Controller(client.api("configmaps", namespace=NS),
                                  wk.ControllerConfig(shutdown_timeout=cm[1], **config)),
                    spans.reconciler("configmap", cm[0])),
        wk.Operator(wk.Controller(client.api("secrets", namespace=NS),
                                  wk.ControllerConfig(shutdown_timeout=sec[1], **config)),
                    spans.reconciler("secret", sec[0])),
    ]


@pytest.mark.looptime
async def test_stop_drains_every_controller_at_once_each_within_its_shutdown_timeout(
    srv: ApiServer,
) -> None:
    loop = asyncio.get_running_loop()
    spans, stop = Spans(), asyncio.Event()
    async with srv.client() as client:
        ops = operators(client, spans, cm=(100.0, 5.0), sec=(3.0, 30.0))
        task = asyncio.create_task(wk.run(*ops, stop=stop, handle_signals=False))
        await spans.until_started("configmap", "secret")
        stopped = loop.time()
        stop.set()
        await asyncio.wait_for(task, 60)
        took = loop.time() - stopped
    ends = {kind: (end - stopped, finished) for kind, _s, end, finished in spans.spans}
    assert ends["secret"][1] is True and ends["secret"][0] < 3.1  # finished its 3 s
    assert ends["configmap"][1] is False  # cancelled at its own shutdown_timeout (5 s)
    assert 4.9 < ends["configmap"][0] < 5.2, ends
    assert took < 5.3, took  # concurrently: not 3 s + 5 s one after the other


@pytest.mark.looptime
async def test_a_failing_controller_drains_the_others_then_run_raises_its_error(
    srv: ApiServer,
) -> None:
    spans = Spans()
    async with srv.client() as client:
        sick, healthy = operators(client, spans, cm=(1000.0, 1.0), sec=(10.0, 30.0))
        sick.controller.config = wk.ControllerConfig(shutdown_timeout=1.0, reconcile_timeout=1,
                                                     max_unhealthy=2)
        with pytest.raises(wk.ControllerUnhealthy) as raised:
            await asyncio.wait_for(wk.run(sick, healthy, handle_signals=False), 60)
    assert raised.value.trigger == "reconcile"
    finished = {kind: done for kind, _s, _e, done in spans.spans}
    assert finished == {"configmap": False, "secret": True}  # the healthy one drained


async def test_one_signal_handler_for_the_whole_run_and_none_left_after(
    srv: ApiServer,
) -> None:
    """Controllers whose own config says handle_signals install nothing under run(); the
    runtime's one handler drains both; after run() the default disposition is back."""
    spans = Spans()
    before = signal.getsignal(signal.SIGTERM)
    async with srv.client() as client:
        ops = operators(client, spans, cm=(0.5, 30.0), sec=(0.5, 30.0))
        assert all(op.controller.config.handle_signals for op in ops)
        task = asyncio.create_task(wk.run(*ops))
        await spans.until_started("configmap", "secret")
        assert signal.getsignal(signal.SIGTERM) is not before  # the runtime's handler
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 20)
    assert {kind for kind, _s, _e, done in spans.spans if done} == {"configmap", "secret"}
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.looptime
async def test_without_handle_signals_nothing_is_installed(srv: ApiServer) -> None:
    spans, stop = Spans(), asyncio.Event()
    before = signal.getsignal(signal.SIGTERM)
    async with srv.client() as client:
        ops = operators(client, spans, cm=(0.1, 30.0), sec=(0.1, 30.0))  # handle_signals=True
        task = asyncio.create_task(wk.run(*ops, stop=stop, handle_signals=False))
        await spans.until_started("configmap", "secret")
        assert signal.getsignal(signal.SIGTERM) == before  # not the controllers' either
        stop.set()
        await asyncio.wait_for(task, 20)


@pytest.mark.looptime
async def test_one_lease_for_several_controllers(srv: ApiServer) -> None:
    """The elector runs once, in the runtime; both controllers reconcile only once it
    leads; the lease is released when the run ends."""
    spans, stop = Spans(), asyncio.Event()
    async with srv.client() as client:
        leases = client.api("leases.coordination.k8s.io", namespace=NS)
        elector = wk.LeaderElector(leases, "both", identity="me")
        ops = operators(client, spans, cm=(0.1, 30.0), sec=(0.1, 30.0))
        probes = wk.HealthServer()
        task = asyncio.create_task(wk.run(*ops, probes=probes, leader_election=elector,
                                          stop=stop, handle_signals=False))
        await spans.until_started("configmap", "secret")
        assert elector.is_leader and elector.transitions == 1
        shared = ops[0].controller.elector
        assert shared is not None and shared is ops[1].controller.elector
        (runtime_sup,) = probes.sources.supervisors  # the elector is the runtime's task
        assert runtime_sup.get("leader elector") is not None
        ready, details = probes.readiness()
        assert ready and [d["lease"] for d in details if "lease" in d] == ["both"]
        stop.set()
        await asyncio.wait_for(task, 20)
        lease = await leases.get("both")
        assert not lease["spec"].get("holderIdentity")  # released on the way out
        assert not probes.serving  # started by run(), so stopped by it


async def test_run_checks_its_arguments(srv: ApiServer) -> None:
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS))
        with pytest.raises(ValueError, match="at least one"):
            await wk.run()
        with pytest.raises(TypeError, match="Operator"):
            await wk.run(ctrl)  # type: ignore[arg-type]
        op = wk.Operator(ctrl, Spans().reconciler("configmap", 0))
        with pytest.raises(ValueError, match="twice"):
            await wk.run(op, wk.Operator(ctrl, op.reconcile))
        other = wk.Operator(
            wk.Controller(client.api("secrets", namespace=NS),
                          wk.ControllerConfig(on_leadership_lost="reacquire")),
            op.reconcile)
        elector = wk.LeaderElector(client.api("leases.coordination.k8s.io", namespace=NS), "x")
        with pytest.raises(ValueError, match="on_leadership_lost"):
            await wk.run(op, other, leader_election=elector)
