"""Sharding with three real controller processes against the simulator: each owns about a
third; after kill -9 its objects are reconciled by the others within two lease durations;
a restarted replica rebalances the ring through the drain; a replica stopped by SIGTERM
hands its objects over at once; and the reconcile log shows no object ever reconciled by
two replicas at once (with the drain disabled in the sharder, this test fails)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.sharding.ring import HashRing
from watchkeeper_sim import ApiServer

from ..reconcile_log import assert_no_object_reconciled_twice_at_once

LEASE, RENEW, RETRY = 2.0, 1.4, 0.3
OBJECTS = 300
KEY = "shard.watchkeeper.io/widgets"
DRAIN = "drain.watchkeeper.io/widgets"
APP = Path(__file__).with_name("shard_app.py")
pytestmark = pytest.mark.realtime


class Replicas:
    def __init__(self, srv: ApiServer, tmp: Path) -> None:
        self.srv, self.tmp = srv, tmp
        self.log = tmp / "reconciles.jsonl"
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, name: str) -> None:
        self.srv.add_user(name)
        self.srv.rbac.grant(name, verbs=["*"], resources=["*"], groups=["*"])
        kubeconfig = self.srv.kubeconfig(self.tmp / f"{name}.kubeconfig", user=name)
        env = {**os.environ, "WK_TEST_REPLICA": name, "WK_TEST_RECONCILE_LOG": str(self.log),
               "WK_TEST_TIMINGS": f"{LEASE},{RENEW},{RETRY}"}
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "run", f"{APP}:setup",
            "--kubeconfig", kubeconfig, "--probe-port", "-1",
            env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def labels(self) -> dict[str, dict[str, str]]:
        """name -> labels, as stored by the server now."""
        out = {}
        rt = self.srv.resource("v1", "configmaps")
        for obj in self.srv.store.list(rt, "shard", lambda _obj: True).items:
            out[obj["metadata"]["name"]] = obj["metadata"].get("labels") or {}
        return out

    async def wait_for(self, predicate: Any, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for p in self.procs.values():
            if p.returncode is None:
                p.kill()
            await p.wait()

    async def stderr(self, name: str) -> str:
        p = self.procs[name]
        if p.returncode is None:
            p.kill()
        await p.wait()
        assert p.stderr is not None
        return (await p.stderr.read()).decode(errors="replace")[-3000:]


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[Replicas]:
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "shard"}})
        for i in range(OBJECTS):
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"widget-{i}", "namespace": "shard"}})
        reps = Replicas(srv, tmp_path)
        try:
            yield reps
        finally:
            await reps.stop()

def settled(reps: Replicas, shards: list[str]) -> bool:
    """Every object labelled as the ring of ``shards`` says, and none draining."""
    ring = HashRing(shards)
    labels = reps.labels()
    return len(labels) == OBJECTS and all(
        lab.get(KEY) == ring.owner(f"shard/{name}") and DRAIN not in lab
        for name, lab in labels.items())


async def test_three_replicas_share_fail_over_and_rebalance_without_overlap(
    replicas: Replicas,
) -> None:
    names = ["replica-a", "replica-b", "replica-c"]
    for name in names:
        await replicas.start(name)
    await replicas.wait_for(lambda: settled(replicas, names), timeout=30)
    began = time.time()
    await replicas.wait_for(
        lambda: len({e["name"] for e in replicas.entries() if e["start"] > began}) == OBJECTS,
        timeout=20)
    # Each replica reconciles exactly the objects labelled with it: about a third.
    labels = replicas.labels()
    owners = {name: lab[KEY] for name, lab in labels.items()}
    recent = [e for e in replicas.entries() if e["start"] > began]
    assert all(owners[e["name"]] == e["id"] for e in recent)
    share = collections.Counter(owners.values())
    assert all(abs(share[n] - OBJECTS / 3) <= 0.2 * OBJECTS / 3 for n in names), share

    # kill -9 one: its objects are reconciled by the others within two lease durations.
    victim = "replica-b"
    orphans = {name for name, owner in owners.items() if owner == victim}
    killed_at = time.time()
    replicas.procs[victim].send_signal(signal.SIGKILL)

    def adopted() -> dict[str, float]:
        first: dict[str, float] = {}
        for e in replicas.entries():
            if e["name"] in orphans and e["id"] != victim and e["start"] > killed_at:
                first.setdefault(e["name"], e["start"])
        return first

    await replicas.wait_for(lambda: len(adopted()) == len(orphans), timeout=4 * LEASE + 10)
    worst = max(adopted().values()) - killed_at
    assert worst <= 2 * LEASE, f"the last orphan was reconciled {worst:.2f} s after kill -9"
    assert settled(replicas, ["replica-a", "replica-c"])

    # Start it again (a new process is a new shard): the ring rebalances through the drain.
    await replicas.start("replica-d")
    rejoined = time.time()
    await replicas.wait_for(lambda: settled(replicas, ["replica-a", "replica-c", "replica-d"]),
                            timeout=30)
    await replicas.wait_for(
        lambda: any(e["id"] == "replica-d" for e in replicas.entries()), timeout=10)
    await asyncio.sleep(2.0)  # requeues keep every replica busy through the hand-over
    entries = replicas.entries()
    moved = [e for e in entries if e["id"] == "replica-d" and e["start"] > rejoined]
    assert abs(len({e["name"] for e in moved}) - OBJECTS / 3) <= 0.25 * OBJECTS / 3
    assert_no_object_reconciled_twice_at_once(entries)
    for name in ("replica-a", "replica-c", "replica-d"):
        assert replicas.procs[name].returncode is None, await replicas.stderr(name)

    # A graceful leave (SIGTERM): it finishes its reconciles, releases its lease, and its
    # objects move at once (no lease expiry to wait for), still never two at a time.
    leaving = {name for name, lab in replicas.labels().items() if lab[KEY] == "replica-a"}
    stopped_at = time.time()
    replicas.procs["replica-a"].send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(replicas.procs["replica-a"].wait(), 10) == 0
    await replicas.wait_for(lambda: settled(replicas, ["replica-c", "replica-d"]), timeout=10)
    await replicas.wait_for(lambda: {e["name"] for e in replicas.entries()
                                     if e["id"] != "replica-a" and e["start"] > stopped_at}
                            >= leaving, timeout=10)
    taken = max(min(e["start"] for e in replicas.entries() if e["name"] == name
                    and e["id"] != "replica-a" and e["start"] > stopped_at) for name in leaving)
    assert taken - stopped_at < LEASE + 1.0, taken - stopped_at
    await asyncio.sleep(1.0)
    assert_no_object_reconciled_twice_at_once(replicas.entries())
