"""Controllers under leader election on virtual time (looptime), against the simulator with
faults: started while the API refuses connections, then an outage longer than the lease.
Only one replica reconciles at a time, a leader that cannot renew stops reconciling within
the renew deadline, and afterwards exactly one replica reconciles again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.leader import LeaderElector
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

NS = "default"
LEASE, RENEW, RETRY = 15.0, 10.0, 2.0


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        for i in range(3):
            server.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": f"cm{i}", "namespace": NS}})
        yield server


@pytest.mark.looptime
async def test_replicas_started_while_refused_then_an_outage_one_reconciles_at_a_time(
    srv: ApiServer,
) -> None:
    loop = asyncio.get_running_loop()
    spans: list[tuple[float, float, str, str]] = []  # (start, end, replica, object)
    stop = asyncio.Event()
    clients: list[wk.Client] = []
    tasks: list[asyncio.Task[None]] = []

    def reconciler(replica: str) -> Any:
        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            start = loop.time()
            try:
                await asyncio.sleep(0.5)
            finally:  # cancelled ones count too, up to the moment they stopped
                spans.append((start, loop.time(), replica, wk.meta.name(obj)))
            return wk.Action.requeue(1.0)
        return reconcile

    def reconciling_since(t: float) -> set[str]:
        return {r for s, _e, r, _n in spans if s >= t}

    srv.faults.refuse()  # every replica starts while the API is down
    for name in ("a", "b"):
        srv.add_user(name)
        srv.rbac.grant(name, verbs=["*"], resources=["*"], groups=["*"])
        client = srv.client(name)
        clients.append(client)
        ctrl = wk.Controller(
            client.api("configmaps", namespace=NS),
            wk.ControllerConfig(handle_signals=False, max_unhealthy=None,
                                on_leadership_lost="reacquire"),
            backoff=wk.ConstantBackoff(1.0),  # the watch is back at once: timing is the lease's
        )
        elector = LeaderElector(client.api("leases.coordination.k8s.io", namespace=NS),
                                "ctrl", identity=name, lease_duration=LEASE,
                                renew_deadline=RENEW, retry_period=RETRY)
        tasks.append(asyncio.create_task(ctrl.run(reconciler(name), stop=stop,
                                                  elector=elector)))
    try:
        await asyncio.sleep(40)
        assert not spans and not any(t.done() for t in tasks)
        back = loop.time()
        srv.faults.clear()
        async with asyncio.timeout(2 * LEASE):
            while not spans:
                await asyncio.sleep(0.1)
        await asyncio.sleep(20)
        (leader,) = reconciling_since(back)

        cut = loop.time()
        srv.faults.refuse()  # an outage of three lease durations
        await asyncio.sleep(3 * LEASE)
        last_end = max(e for _s, e, r, _n in spans if r == leader)
        assert last_end <= cut + RENEW + 0.01, last_end - cut  # stopped within the deadline
        assert not [s for s in spans if s[0] > last_end]  # and nobody reconciled meanwhile
        back = loop.time()
        srv.faults.clear()
        async with asyncio.timeout(2 * LEASE):
            while not reconciling_since(back):
                await asyncio.sleep(0.1)
        await asyncio.sleep(30)
        assert len(reconciling_since(back)) == 1, reconciling_since(back)
        assert not any(t.done() for t in tasks)
    finally:
        srv.faults.clear()
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in clients:
            await c.close()
    # No two replicas ever reconciled at the same moment (so no object twice at once).
    latest_end: dict[str, float] = {}
    for start, end, replica, name in sorted(spans):
        for other, other_end in latest_end.items():
            assert other == replica or start >= other_end, (name, replica, start, other,
                                                            other_end)
        latest_end[replica] = max(end, latest_end.get(replica, end))
