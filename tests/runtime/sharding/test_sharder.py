"""The sharder's rules against the simulator, in one process: assign unlabelled objects;
move a dead shard's objects at once; ask a live owner to drain (and never move its objects
while it has not let go); children follow their owner. Short real leases (1 s)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.leader import LeaderElector
from watchkeeper.sharding import HashRing, RingView, Sharder
from watchkeeper.sharding.membership import membership_elector
from watchkeeper.supervisor import Supervisor
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.realtime

NS = "shard"
TIMINGS = {"lease_duration": 1.0, "renew_deadline": 0.7, "retry_period": 0.2}
KEY, DRAIN = "shard.watchkeeper.io/w", "drain.watchkeeper.io/w"


def sharding(replica: str) -> wk.Sharding:
    return wk.Sharding(ring="w", replica_id=replica, lease_namespace=NS, **TIMINGS)


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}}}


def labels(srv: ApiServer, kind: str = "ConfigMap") -> dict[str, dict[str, str]]:
    rt = srv.resource("v1", kind)
    return {o["metadata"]["name"]: o["metadata"].get("labels") or {}
            for o in srv.store.list(rt, NS, lambda _o: True).items}


def lease_names(srv: ApiServer) -> set[str]:
    rt = srv.resource("coordination.k8s.io/v1", "Lease")
    return {o["metadata"]["name"] for o in srv.store.list(rt, NS, lambda _o: True).items}


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield server


async def test_assign_reassign_dead_drain_live_and_children_follow(
    srv: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.sharding")
    for i in range(30):
        srv.create_object(cm(f"free-{i}"))
    for i in range(5):
        srv.create_object(cm(f"orphan-{i}", {KEY: "gone"}))  # a shard with no lease at all
    owner = srv.create_object(cm("parent"))
    srv.create_object({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "child", "namespace": NS, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
            "uid": owner["metadata"]["uid"], "controller": True}]}})
    names = [f"free-{i}" for i in range(30)] + [f"orphan-{i}" for i in range(5)] + ["parent"]

    me = sharding("me")
    async with srv.client() as client, Supervisor("test") as sup:
        leases = client.api("leases.coordination.k8s.io", namespace=NS)
        view = RingView(me, leases)
        sharder = Sharder(me, view, client.api("configmaps", namespace=NS),
                          [client.api("secrets", namespace=NS)], leases)
        electors: dict[str, LeaderElector] = {}

        def join(replica: str) -> None:
            e = electors[replica] = membership_elector(sharding(replica), leases)
            e.release_on_stop = False  # a crash: the lease is left to expire
            sup.spawn(f"member {replica}", e.run, forever=False)

        def settled(shards: list[str]) -> bool:
            ring, now = HashRing(shards), labels(srv)
            return all(now[n].get(KEY) == ring.owner(f"{NS}/{n}") and DRAIN not in now[n]
                       for n in names)

        join("me")
        join("ghost")
        sup.spawn("view", view.run)
        sup.spawn("sharder", sharder.run)

        # Unlabelled objects are assigned; a shard with no lease is dead after one lease
        # duration of absence; the child gets its owner's label.
        await eventually(lambda: settled(["ghost", "me"]))
        assert sharder.is_sharder
        assert sharder.stats.writes.get("drain", 0) == 0
        await eventually(lambda: labels(srv, "Secret")["child"].get(KEY)
                         == labels(srv)["parent"][KEY])

        # ghost crashes: once its lease expired (as we observe it), its objects move at
        # once, without a drain (nobody is left to drain them).
        ghosts = [n for n, lab in labels(srv).items() if lab.get(KEY) == "ghost"]
        assert ghosts
        # (While its objects cannot be moved, its lease is kept: the ring still needs it.)
        srv.faults.error(503, method="PATCH", path_prefix=f"/api/v1/namespaces/{NS}/configmaps")
        await sup.cancel("member ghost")
        await eventually(lambda: "ghost" in view.dead)
        await asyncio.sleep(4 * TIMINGS["lease_duration"])
        assert "w-shard-ghost" in lease_names(srv) and sharder.stats.leases_deleted == 0
        srv.faults.clear()
        # (RBAC without "delete" on leases: said once, the lease stays, tried again later.)
        srv.faults.error(403, method="DELETE",
                         path_prefix=f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases")
        await eventually(lambda: settled(["me"]))
        assert sharder.stats.writes.get("reassign", 0) >= len(ghosts)
        assert sharder.stats.writes.get("drain", 0) == 0
        await asyncio.sleep(3 * TIMINGS["lease_duration"])
        said = [r.getMessage() for r in caplog.records if "deleting lease" in r.getMessage()]
        assert len(said) == 1 and "w-shard-ghost" in said[0] and "Forbidden" in said[0], said
        assert "w-shard-ghost" in lease_names(srv)
        srv.faults.clear()
        # Then its lease is deleted (replicas with new names must not pile up in the ring),
        # never while an object still carried its label; the live shard's lease stays.
        await eventually(lambda: "w-shard-ghost" not in lease_names(srv))
        assert sharder.stats.leases_deleted == 1
        assert "w-shard-me" in lease_names(srv)
        await eventually(lambda: "ghost" not in view.dead)  # (on its next list)

        # A new shard joins: objects that move to it are drained first; while their owner
        # ("me": nobody runs its controller here) has not let go, they stay with it.
        join("newcomer")
        ring = HashRing(["me", "newcomer"])
        moving = [n for n in names if ring.owner(f"{NS}/{n}") == "newcomer"]
        assert moving
        await eventually(lambda: all(labels(srv)[n].get(DRAIN) == "me" for n in moving))
        await asyncio.sleep(3 * TIMINGS["lease_duration"])
        now = labels(srv)
        assert all(now[n][KEY] == "me" and now[n][DRAIN] == "me" for n in moving)
        assert sharder.stats.writes["drain"] == len(moving)

        # The owner lets go (what a draining replica's release patch does): they move.
        for n in moving:
            await client.api("configmaps", namespace=NS).patch(
                n, sharding("me").release_patch(), type="json")
        await eventually(lambda: settled(["me", "newcomer"]))
        await eventually(lambda: labels(srv, "Secret")["child"].get(KEY)
                         == labels(srv)["parent"][KEY])
        for name in list(electors):
            if sup.get(f"member {name}") is not None:
                await sup.cancel(f"member {name}")
        await sup.cancel("view", "sharder")


async def test_refused_label_writes_back_off_and_are_said_once(
    srv: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Without "patch" in its RBAC every label write fails alike: each object is tried
    again after 1, 2, 4... s (not every second: no hot loop against the API server) and
    the failure is said once a minute, not once per object; once allowed, all are labelled."""
    caplog.set_level(logging.INFO, logger="watchkeeper.sharding")
    for i in range(40):
        srv.create_object(cm(f"c-{i}"))
    me = sharding("me")
    fault = srv.faults.error(403, method="PATCH", path_prefix=f"/api/v1/namespaces/{NS}/")
    async with srv.client() as client, Supervisor("test") as sup:
        leases = client.api("leases.coordination.k8s.io", namespace=NS)
        view = RingView(me, leases)
        sharder = Sharder(me, view, client.api("configmaps", namespace=NS), [], leases)
        sup.spawn("member me", membership_elector(me, leases).run, forever=False)
        sup.spawn("view", view.run)
        sup.spawn("sharder", sharder.run)
        await eventually(lambda: srv.count(method="PATCH") > 0)
        started = srv.requests[-1].time
        await asyncio.sleep(7)
        patches = srv.count(method="PATCH", since=started - 1)
        said = [r.getMessage() for r in caplog.records if "labelling" in r.getMessage()]
        srv.faults.remove(fault)
        # at 0, 1, 3 and 7 s: at most 4 tries each in 7 s (every second: 8 each)
        assert 40 <= patches <= 40 * 4 + 8, patches
        assert len(said) == 1 and "Forbidden" in said[0], said
        await eventually(lambda: all(KEY in lab for lab in labels(srv).values()), timeout=20)
        await sup.cancel("member me", "view", "sharder")
