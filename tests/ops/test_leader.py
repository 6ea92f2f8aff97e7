"""Leader election with three real controller processes against the simulator."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.testing import ApiServer

LEASE, RENEW, RETRY = 4.0, 3.0, 0.5
APP = Path(__file__).with_name("leader_app.py")
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
        env = {**os.environ, "POD_NAME": name, "WK_TEST_RECONCILE_LOG": str(self.log)}
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "run", f"{APP}:setup",
            "--kubeconfig", kubeconfig, "--probe-port", "-1", "--leader-election",
            "--lease-name", "leader-test", "--lease-namespace", "lead",
            "--lease-duration", str(LEASE), "--renew-deadline", str(RENEW),
            "--retry-period", str(RETRY),
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
    spans = sorted((e["start"], e["end"], e["id"]) for e in entries)
    for (_s1, e1, id1), (s2, _e2, id2) in itertools.pairwise(spans):
        if id1 != id2:
            assert s2 >= e1, f"{id1} and {id2} reconciled at the same time ({s2} < {e1})"


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
