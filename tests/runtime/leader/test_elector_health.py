"""The leader elector's health in every signal (issue 10 item 2): /readyz, /readyz?verbose,
/healthz, `watchkeeper status` and /metrics, over HTTP, for replicas composed as
`watchkeeper run` composes them (``run_operator``) against the simulator with faults on the
Lease path only, on virtual time (looptime).

Before this, an elector that could not reach its lease left /readyz and /healthz at 200
and ``watchkeeper_leader`` at 0 with no explanation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

import watchkeeper as wk
from watchkeeper._runner import run_operator
from watchkeeper.leader import ElectorState, LeaderElector
from watchkeeper.ops import HealthServer
from watchkeeper.ops.status import print_status
from watchkeeper_sim import ApiServer

pytestmark = [pytest.mark.looptime, pytest.mark.filterwarnings("ignore::ResourceWarning")]

NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
UNREADY_AFTER = 30.0


@dataclass
class Replica:
    name: str
    client: wk.Client
    controller: wk.Controller
    elector: LeaderElector
    probes: HealthServer
    task: asyncio.Task[None]
    reconciled: list[str] = field(default_factory=list)

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as http, http.get(self.probes.url + path) as resp:
            return resp.status, await resp.text()

    async def verbose(self) -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as http, http.get(
            self.probes.url + "/readyz?verbose"
        ) as resp:
            return resp.status, await resp.json()

    async def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        _, text = await self.get("/metrics")
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out


@dataclass
class Cluster:
    srv: ApiServer
    replicas: list[Replica] = field(default_factory=list)

    async def start(self, name: str, **config: Any) -> Replica:
        """One replica with its own user (so a fault can target it), composed like `run`."""
        self.srv.add_user(name)
        self.srv.rbac.grant(name, verbs=["*"], resources=["*"], groups=["*"])
        client = self.srv.client(name)
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             wk.ControllerConfig(handle_signals=False, **config))
        elector = LeaderElector(client.api("leases.coordination.k8s.io", namespace=NS),
                                "the-lease", identity=name)
        probes = HealthServer()
        await probes.start()
        reconciled: list[str] = []

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            reconciled.append(wk.meta.name(obj))
            return wk.Action.await_change()

        op = wk.Operator(ctrl, reconcile)
        task = asyncio.create_task(run_operator(op, probes, elector, probe_check_interval=1))
        r = Replica(name, client, ctrl, elector, probes, task, reconciled)
        self.replicas.append(r)
        return r


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with ApiServer() as srv:
        for i in range(3):
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"cm{i}", "namespace": NS}})
        c = Cluster(srv)
        try:
            yield c
        finally:
            srv.faults.clear()
            for r in c.replicas:
                r.task.cancel()
            await asyncio.gather(*(r.task for r in c.replicas), return_exceptions=True)
            for r in c.replicas:
                await r.probes.stop()
                await r.client.close()


async def until(check: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.25)


LEASE_LABEL = (("lease", "the-lease"),)


async def test_a_follower_that_cannot_reach_its_lease_goes_unready_and_back(
    cluster: Cluster, capsys: pytest.CaptureFixture[str],
) -> None:
    """A healthy follower is ready; one whose lease requests fail for longer than
    elector_unready_after is not (503, naming the elector and the last error), while
    liveness holds until max_unhealthy; it is ready again once the lease answers."""
    loop = asyncio.get_running_loop()
    a = await cluster.start("a", max_unhealthy=600, elector_unready_after=UNREADY_AFTER)

    async def a_leads() -> bool:
        return a.elector.is_leader and len(a.reconciled) >= 3

    await until(a_leads, 30)
    b = await cluster.start("b", max_unhealthy=600, elector_unready_after=UNREADY_AFTER)

    async def b_follows() -> bool:
        return b.elector.health.state is ElectorState.FOLLOWING and b.controller.store.ready

    await until(b_follows, 30)
    # A healthy follower is ready (its caches are warm) and says whom it follows.
    assert (await b.get("/readyz"))[0] == 200
    status, body = await b.verbose()
    assert status == 200 and body["ready"] is True
    (e,) = body["electors"]
    assert e["lease"] == "the-lease" and e["identity"] == "b" and e["holder"] == "a"
    assert e["state"] == "following" and e["leader"] is False and e["ready"] is True
    assert e["consecutive_failures"] == 0 and e["last_error"] is None
    assert e["run_by"] == "controller configmaps"
    assert all(w["resource"] == "configmaps" for w in body["watches"])  # not mixed in

    cluster.srv.faults.error(503, message="etcd leader changed", path_prefix=LEASES,
                             user="b")
    cut = loop.time()
    await asyncio.sleep(UNREADY_AFTER - 10)
    # Degraded, and shown as such, but not yet past the threshold: still ready.
    status, body = await b.verbose()
    assert status == 200, body
    (e,) = body["electors"]
    assert e["state"] == "degraded" and e["ready"] is True and e["consecutive_failures"] >= 3
    assert e["last_error"].startswith("ServerError: ") and "503" in e["last_error"]

    async def b_unready() -> bool:
        return (await b.get("/readyz"))[0] == 503

    await until(b_unready, 60)
    assert loop.time() - cut >= UNREADY_AFTER
    _, text = await b.get("/readyz")
    line = next(x for x in text.splitlines() if x.startswith("[-] controller configmaps"))
    assert "leader election: lease the-lease: the leader elector has not reached its lease" \
        in line, text
    assert "ServerError: " in line and "etcd leader changed" in line, line
    assert f"elector_unready_after {UNREADY_AFTER:g} s" in line, line
    assert "[-] lease the-lease: " in text, text

    status, body = await b.verbose()
    assert status == 503 and body["ready"] is False
    (e,) = body["electors"]
    assert e["state"] == "degraded" and e["ready"] is False and e["holder"] == "a"
    assert e["consecutive_failures"] >= 8 and e["failures"] == e["consecutive_failures"]
    assert e["errors"] == {"ServerError": e["failures"]}
    assert e["not_working_for"] >= UNREADY_AFTER and "ServerError" in e["problem"]
    assert e["since"] is not None and e["last_error_at"] is not None
    (c,) = body["controllers"]
    assert c["ready"] is False and "leader election" in c["problems"]
    assert (await b.get("/healthz"))[0] == 200  # liveness waits for max_unhealthy

    # The leader is untouched: ready, and its metrics say so.
    assert (await a.get("/readyz"))[0] == 200 and a.elector.is_leader
    ma = await a.metrics()
    assert ma[("watchkeeper_leader", LEASE_LABEL)] == 1
    assert ma[("watchkeeper_leader_election_state", LEASE_LABEL)] == 2

    mb = await b.metrics()
    assert mb[("watchkeeper_leader", LEASE_LABEL)] == 0
    assert mb[("watchkeeper_leader_election_state", LEASE_LABEL)] == 3
    failures = mb[("watchkeeper_leader_election_failures_total",
                   (("error", "ServerError"), *LEASE_LABEL))]
    assert failures >= 8
    assert mb[("watchkeeper_leader_election_consecutive_failures", LEASE_LABEL)] >= 8

    assert await print_status(b.probes.url) == 1
    out = capsys.readouterr().out
    assert "NOT READY" in out and "leader election" in out and "the-lease" in out
    assert "degraded" in out and "ServerError" in out and "in a row" in out

    cluster.srv.faults.clear()

    async def b_ready() -> bool:
        return (await b.get("/readyz"))[0] == 200

    await until(b_ready, 10)
    status, body = await b.verbose()
    (e,) = body["electors"]
    assert e["state"] == "following" and e["ready"] is True and e["consecutive_failures"] == 0
    assert e["last_error"].startswith("ServerError: ")  # still there to read
    mb = await b.metrics()
    assert mb[("watchkeeper_leader_election_state", LEASE_LABEL)] == 1
    assert mb[("watchkeeper_leader_election_consecutive_failures", LEASE_LABEL)] == 0
    assert mb[("watchkeeper_leader_election_failures_total",
               (("error", "ServerError"), *LEASE_LABEL))] >= failures
    assert await print_status(b.probes.url) == 0
    assert "following" in capsys.readouterr().out
    assert not a.task.done() and not b.task.done()


async def test_an_elector_that_never_reaches_its_lease_ends_the_run_past_max_unhealthy(
    cluster: Cluster,
) -> None:
    """Started while its lease path answers 503 (the watches work): not ready after
    elector_unready_after, not alive past max_unhealthy, and the run ends with
    ControllerUnhealthy naming the leader election and the last error."""
    loop = asyncio.get_running_loop()
    cluster.srv.faults.error(503, path_prefix=LEASES)
    started = loop.time()
    r = await cluster.start("a", max_unhealthy=60, elector_unready_after=20)
    await r.controller.store.wait_until_ready(timeout=10)
    assert (await r.get("/readyz"))[0] == 200  # degraded, not yet past 20 s

    async def unready() -> bool:
        return (await r.get("/readyz"))[0] == 503

    await until(unready, 40)
    assert 20 <= loop.time() - started < 25
    assert (await r.get("/healthz"))[0] == 200

    async def dead() -> bool:
        return (await r.get("/healthz"))[0] == 503

    await until(dead, 60)
    _, text = await r.get("/healthz")
    assert "[-] controller configmaps: lease the-lease: the leader elector" in text
    assert "max_unhealthy 60 s" in text and "ServerError" in text
    with pytest.raises(wk.ControllerUnhealthy) as info:
        async with asyncio.timeout(30):
            await r.task
    assert info.value.trigger == "leader election"
    assert "lease the-lease" in str(info.value) and "ServerError" in str(info.value)
    assert 60 <= loop.time() - started < 70
    assert r.reconciled == []  # it never led


async def test_an_elector_added_on_its_own_uses_the_probe_thresholds(
    cluster: Cluster,
) -> None:
    """HealthServer.add_elector(e, unready_after, max_unhealthy) for an elector that no
    added controller runs: the same rule, with the thresholds given there."""
    cluster.srv.add_user("solo")
    cluster.srv.rbac.grant("solo", verbs=["*"], resources=["*"], groups=["*"])
    cluster.srv.faults.refuse(count_refused=True)
    async with cluster.srv.client("solo") as client:
        elector = LeaderElector(client.api("leases.coordination.k8s.io", namespace=NS),
                                "solo-lease", identity="solo")
        probes = HealthServer().add_elector(elector, unready_after=10, max_unhealthy=40)
        await probes.start()
        task = asyncio.create_task(elector.run())
        try:
            async with aiohttp.ClientSession() as http:
                async def status(path: str) -> int:
                    async with http.get(probes.url + path) as resp:
                        return resp.status

                await asyncio.sleep(5)
                assert await status("/readyz") == 200
                await asyncio.sleep(10)
                assert await status("/readyz") == 503 and await status("/healthz") == 200
                async with http.get(probes.url + "/readyz") as resp:
                    text = await resp.text()
                assert "[-] lease solo-lease: lease solo-lease: the leader elector" in text
                assert "ConnectionFailed: " in text
                await asyncio.sleep(30)
                assert await status("/healthz") == 503
                cluster.srv.faults.clear()

                async def leads() -> bool:
                    return elector.is_leader and await status("/readyz") == 200 \
                        and await status("/healthz") == 200

                await until(leads, 30)
                async with http.get(probes.url + "/metrics") as resp:
                    text = await resp.text()
                assert 'watchkeeper_leader{lease="solo-lease"} 1.0' in text
                assert 'watchkeeper_leader_election_state{lease="solo-lease"} 2.0' in text
                assert ('watchkeeper_leader_election_failures_total{error="ConnectionFailed",'
                        'lease="solo-lease"}') in text
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await probes.stop()


def test_elector_unready_after_must_be_positive_or_none() -> None:
    assert wk.ControllerConfig(elector_unready_after=None).elector_unready_after is None
    with pytest.raises(ValueError, match="elector_unready_after"):
        wk.ControllerConfig(elector_unready_after=0)
