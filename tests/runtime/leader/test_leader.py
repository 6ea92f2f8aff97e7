"""Leader election with three real controller processes against the simulator."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper_sim import ApiServer

from ..reconcile_log import assert_no_object_reconciled_twice_at_once

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5
APP = Path(__file__).with_name("leader_app.py")
pytestmark = pytest.mark.realtime


class Replicas:
    def __init__(self, srv: ApiServer, tmp: Path) -> None:
        self.srv, self.tmp = srv, tmp
        self.log = tmp / "reconciles.jsonl"
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(
        self, name: str, timings: tuple[float, float, float] = (LEASE, RENEW, RETRY)
    ) -> None:
        lease, renew, retry = timings
        self.srv.add_user(name)
        self.srv.rbac.grant(name, verbs=["*"], resources=["*"], groups=["*"])
        kubeconfig = self.srv.kubeconfig(self.tmp / f"{name}.kubeconfig", user=name)
        env = {**os.environ, "POD_NAME": name, "WK_TEST_RECONCILE_LOG": str(self.log)}
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "run", f"{APP}:setup",
            "--kubeconfig", kubeconfig, "--probe-port", "-1", "--leader-election",
            "--lease-name", "leader-test", "--lease-namespace", "lead",
            "--lease-duration", str(lease), "--renew-deadline", str(renew),
            "--retry-period", str(retry),
            env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def leader_at(self, t: float) -> str | None:
        last = [e for e in self.entries() if e["start"] <= t]
        return last[-1]["id"] if last else None

    async def wait_for(self, predicate: Any, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for p in self.procs.values():
            if p.returncode is None:
                p.kill()
            await p.wait()


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[Replicas]:
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lead"}})
        for i in range(3):
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"work-{i}", "namespace": "lead"}})
        reps = Replicas(srv, tmp_path)
        try:
            yield reps
        finally:
            await reps.stop()

def assert_no_overlap(entries: list[dict[str, Any]]) -> None:
    """No two replicas ever had a reconcile running at the same moment."""
    latest_end: dict[str, float] = {}  # replica -> end of its latest reconcile so far
    for start, end, rid in sorted((e["start"], e["end"], e["id"]) for e in entries):
        for other, other_end in latest_end.items():
            assert other == rid or start >= other_end, (
                f"{other} and {rid} reconciled at the same time ({start} < {other_end})"
            )
        latest_end[rid] = max(end, latest_end.get(rid, end))


async def test_one_leader_at_a_time_and_failover_after_kill_9(replicas: Replicas) -> None:
    for name in ("replica-a", "replica-b", "replica-c"):
        await replicas.start(name)
    await replicas.wait_for(lambda: len(replicas.entries()) >= 20, timeout=30)
    leaders = {e["id"] for e in replicas.entries()}
    assert len(leaders) == 1, leaders
    leader = leaders.pop()

    killed_at = time.time()
    replicas.procs[leader].send_signal(signal.SIGKILL)
    await replicas.wait_for(
        lambda: any(e["id"] != leader and e["start"] > killed_at for e in replicas.entries()),
        timeout=LEASE + RETRY * 2 + 10,
    )
    first_new = min(e["start"] for e in replicas.entries()
                    if e["id"] != leader and e["start"] > killed_at)
    # The lease must expire first (no split brain), and then one retry period is enough.
    assert first_new - killed_at <= LEASE + 2 * RETRY + 1.5, first_new - killed_at
    await asyncio.sleep(2)
    entries = replicas.entries()
    assert_no_overlap(entries)
    after = {e["id"] for e in entries if e["start"] > first_new}
    assert len(after) == 1 and leader not in after


async def test_a_partitioned_leader_stops_before_another_can_take_over(
    replicas: Replicas,
) -> None:
    for name in ("replica-a", "replica-b"):
        await replicas.start(name)
    await replicas.wait_for(lambda: len(replicas.entries()) >= 20, timeout=30)
    (leader,) = {e["id"] for e in replicas.entries()}
    partitioned_at = time.time()
    # The leader's requests now hang: it can neither renew its lease nor see the cluster.
    replicas.srv.faults.hang(user=leader)
    await replicas.wait_for(
        lambda: any(e["id"] != leader for e in replicas.entries()), timeout=LEASE + RENEW + 15
    )
    entries = replicas.entries()
    old_last_end = max(e["end"] for e in entries if e["id"] == leader)
    new_first = min(e["start"] for e in entries if e["id"] != leader)
    assert old_last_end < new_first  # stopped before the other started: no split brain
    assert old_last_end - partitioned_at <= RENEW + 1.0  # it stopped within the renew deadline
    assert_no_overlap(entries)
    # The partitioned replica exits non-zero (leadership lost), visibly.
    proc = replicas.procs[leader]
    await asyncio.wait_for(proc.wait(), 20)
    assert proc.returncode == 1


async def test_blip_outage_and_a_replica_started_during_it_then_exactly_one_leads(
    replicas: Replicas, tmp_path: Path
) -> None:
    """Issue 10's acceptance test: a 503 blip, an API outage longer than the lease, and a
    replica started while the API is down; afterwards exactly one replica leads within two
    lease durations, and no object was ever reconciled by two replicas at once."""
    lease, renew, retry = timings = (3.0, 2.0, 0.5)
    srv = replicas.srv
    for name in ("replica-a", "replica-b"):
        await replicas.start(name, timings)
    await replicas.wait_for(lambda: len(replicas.entries()) >= 20, timeout=30)
    (leader,) = {e["id"] for e in replicas.entries()}

    # 1. A 503 blip on every request, well inside the renew deadline: the leader keeps on.
    blip = time.time()
    srv.faults.error(503, message="etcdserver: leader changed", duration=0.5)
    await asyncio.sleep(0.5 + 2 * retry)
    count = len(replicas.entries())
    await replicas.wait_for(lambda: len(replicas.entries()) >= count + 10, timeout=10)
    assert {e["id"] for e in replicas.entries() if e["start"] > blip} == {leader}

    # 2. An outage of two lease durations; a third replica starts while the API is down.
    cut = time.time()
    srv.faults.refuse()
    await asyncio.sleep(0.5)
    await replicas.start("replica-c", timings)
    await asyncio.sleep(2 * lease - 0.5)
    back = time.time()
    srv.faults.clear()
    entries = replicas.entries()
    old_last_end = max(e["end"] for e in entries if e["id"] == leader)
    assert old_last_end <= cut + renew + 0.5, old_last_end - cut  # stepped down in time
    assert not [e for e in entries if e["start"] > old_last_end]  # nobody led meanwhile

    # 3. Exactly one replica leads again within two lease durations, and stays the only one.
    await replicas.wait_for(
        lambda: any(e["start"] > back for e in replicas.entries()), timeout=2 * lease + 10
    )
    first = min(e["start"] for e in replicas.entries() if e["start"] > back)
    assert first - back <= 2 * lease, first - back
    await asyncio.sleep(3)
    entries = replicas.entries()
    (new_leader,) = {e["id"] for e in entries if e["start"] > back}
    holder = srv.get_object("coordination.k8s.io/v1", "Lease", "leader-test", namespace="lead")
    assert holder["spec"]["holderIdentity"].startswith(new_leader)
    assert_no_object_reconciled_twice_at_once(entries)
    assert_no_overlap(entries)
    # The old leader lost its lease during the outage and exited non-zero (visibly); the
    # others rode the outage out.
    proc = replicas.procs[leader]
    await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 1
    for name, p in replicas.procs.items():
        if name != leader:
            assert p.returncode is None, (name, p.returncode)
