"""Sharding across replicas (issue 13): 3 replicas against 1, on one simulator.

The simulator (its own process) is seeded with ``--objects`` ConfigMaps of ~1.1 KB. Then,
for 1 replica and for 3, real ``watchkeeper run`` processes run a sharded controller
(``wk.Sharding``; each scenario its own ring, so their labels do not interfere). Each
reconcile awaits ``--work`` seconds (a stand-in for a remote call: no CPU, no API request)
and requeues after ``--requeue`` seconds, so replicas are kept busy.

Measured per scenario, read from each replica's ``/metrics`` and ``/proc``:

* time until every object is labelled and cached by its replica (``settle s``);
* per replica: watch events received by its controller, objects cached, RSS, and, for the
  replica that is the sharder, the metadata-only events its sharder received;
* total reconcile throughput over ``--window`` seconds, and the CPU used meanwhile by the
  replicas and by the simulator (what limits the 3-vs-1 ratio on this machine);
* with 3 replicas: ``kill -9`` of the sharder replica (the worst case: both its shard lease
  and the sharder lease must expire, and the new sharder must list every object first);
  recovery = time until every object it owned was reconciled by a survivor; then a new
  replica joins: time until the ring has rebalanced through the drain.

    PYTHONPATH=src:sim python -m benchmarks.sharding [--objects 30000] [--window 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    PYTHON,
    ROOT,
    markdown_table,
    save_results,
    server_cpu_seconds,
    wait_for_quiet,
)
from benchmarks._server import SimProcess

NAMESPACE = "sharding"
APP = f"{Path(__file__).resolve()}:setup"


# -- the replica's operator (loaded by ``watchkeeper run benchmarks/sharding.py:setup``) --------


def setup(client: Any) -> Any:
    """A sharded controller on the seeded ConfigMaps. Writes ``name<TAB>time`` to
    ``$WK_BENCH_LOG`` the first time it reconciles each version of an object (a moved
    object is a new version: its shard label changed), so the parent can tell when a
    survivor first reconciled an orphan."""
    import watchkeeper as wk

    lease, renew, retry = (float(x) for x in os.environ["WK_BENCH_TIMINGS"].split(","))
    work, requeue = float(os.environ["WK_BENCH_WORK"]), float(os.environ["WK_BENCH_REQUEUE"])
    mode, concurrency = os.environ["WK_BENCH_MODE"], int(os.environ["WK_BENCH_CONCURRENCY"])
    sharding = wk.Sharding(ring=os.environ["WK_BENCH_RING"],
                           replica_id=os.environ["WK_BENCH_REPLICA"],
                           lease_namespace=NAMESPACE, lease_duration=lease,
                           renew_deadline=renew, retry_period=retry)
    log = open(os.environ["WK_BENCH_LOG"], "a", buffering=1)  # noqa: SIM115 (process lifetime)
    versions: dict[str, str] = {}

    api = client.api("configmaps", namespace=NAMESPACE)

    async def reconcile(obj: dict[str, Any], ctx: Any) -> Any:
        md = obj["metadata"]
        if mode == "io":  # waiting on something remote that is not the API server
            await asyncio.sleep(work)
        elif mode == "cpu":  # computing
            end = time.perf_counter() + work
            while time.perf_counter() < end:
                pass
        else:  # "api": one GET of the object from the API server
            await api.get(md["name"])
        if versions.get(md["name"]) != md["resourceVersion"]:
            versions[md["name"]] = md["resourceVersion"]
            log.write(f"{md['name']}\t{time.time()}\n")
        return wk.Action.requeue(requeue)

    controller = wk.Controller(api, wk.ControllerConfig(concurrency=concurrency),
                               sharding=sharding)
    return wk.Operator(controller, reconcile)


# -- the parent -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _parse_metrics(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for the families this benchmark reads."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


class Replica:
    def __init__(self, name: str, ring: str, a: argparse.Namespace, tmp: Path, kubeconfig: Path
                 ) -> None:
        self.name, self.ring, self.a = name, ring, a
        self.port = _free_port()
        self.log = tmp / f"{ring}-{name}.log"
        self.kubeconfig = kubeconfig
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = tmp / f"{ring}-{name}.stderr"

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}",
               "WK_BENCH_RING": self.ring, "WK_BENCH_REPLICA": self.name,
               "WK_BENCH_LOG": str(self.log),
               "WK_BENCH_TIMINGS": f"{self.a.lease},{self.a.renew},{self.a.retry}",
               "WK_BENCH_WORK": str(self.a.work), "WK_BENCH_REQUEUE": str(self.a.requeue),
               "WK_BENCH_MODE": self.a.reconcile,
               "WK_BENCH_CONCURRENCY": str(self.a.concurrency)}
        with open(self.stderr, "w") as err:  # noqa: ASYNC230 (once, before the measurement)
            self.proc = await asyncio.create_subprocess_exec(
                PYTHON, "-m", "watchkeeper.cli", "run", APP, "--kubeconfig",
                str(self.kubeconfig), "--probe-host", "127.0.0.1", "--probe-port",
                str(self.port), env=env, stdout=asyncio.subprocess.DEVNULL, stderr=err,
                cwd=ROOT)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def metrics(self) -> dict[str, float]:
        import aiohttp

        try:
            async with aiohttp.ClientSession() as s, s.get(
                    f"http://127.0.0.1:{self.port}/metrics",
                    timeout=aiohttp.ClientTimeout(total=10)) as r:
                return _parse_metrics(await r.text())
        except (aiohttp.ClientError, TimeoutError, OSError):
            return {}

    def m(self, metrics: dict[str, float], family: str) -> float:
        """Sum of one family's samples."""
        return sum(v for k, v in metrics.items()
                   if k == family or k.startswith(family + "{"))

    def first_times(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        if not self.log.exists():
            return out
        for line in self.log.read_text().splitlines():
            name, _, t = line.partition("\t")
            if t:
                out.setdefault(name, []).append(float(t))
        return out

    async def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


async def _sample(reps: list[Replica]) -> list[dict[str, float]]:
    return list(await asyncio.gather(*(r.metrics() for r in reps)))


async def _settled(reps: list[Replica], objects: int, balanced: bool) -> bool:
    """Every object cached by exactly one live replica, none draining (twice, 1 s apart)."""
    for i in range(2):
        ms = await _sample(reps)
        owned = [r.m(m, "watchkeeper_shard_owned_objects") for r, m in zip(reps, ms, strict=True)]
        draining = sum(r.m(m, "watchkeeper_shard_draining_objects")
                       for r, m in zip(reps, ms, strict=True))
        if i == 0:
            writes = [int(r.m(m, "watchkeeper_sharder_label_writes_total")) for r, m in
                      zip(reps, ms, strict=True)]
            print(f"  owned {[int(x) for x in owned]} draining {int(draining)} "
                  f"sharder writes {writes}", file=sys.stderr)
        if sum(owned) != objects or draining or any(not m for m in ms):
            return False
        if balanced and min(owned) < 0.6 * objects / len(reps):
            return False
        if i == 0:
            await asyncio.sleep(1.0)
    return True


async def _wait(predicate: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not await predicate():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.5)
    return time.monotonic() - t0


async def _scenario(n: int, a: argparse.Namespace, sim: SimProcess, tmp: Path) -> dict[str, Any]:
    ring = f"bench{n}-{int(time.time()) % 100000}"
    reps = [Replica(f"replica-{i}", ring, a, tmp, sim.kubeconfig) for i in range(n)]
    result: dict[str, Any] = {"replicas": n, "ring": ring}
    wait_for_quiet()
    started = time.monotonic()
    for r in reps:
        await r.start()
    try:
        await _wait(lambda: _settled(reps, a.objects, balanced=n > 1), a.timeout, "settle")
        result["settle_s"] = round(time.monotonic() - started - 1.0, 2)  # minus the recheck
        # Throughput window: reconciles per second, and the CPU that bought them.
        before = await _sample(reps)
        cpu0 = [server_cpu_seconds(r.pid) for r in reps]
        sim0, t0 = server_cpu_seconds(sim.pid), time.monotonic()
        await asyncio.sleep(a.window)
        after = await _sample(reps)
        elapsed = time.monotonic() - t0
        cpu1 = [server_cpu_seconds(r.pid) for r in reps]
        sim1 = server_cpu_seconds(sim.pid)
        total = sum(r.m(m1, "watchkeeper_reconcile_total") - r.m(m0, "watchkeeper_reconcile_total")
                    for r, m0, m1 in zip(reps, before, after, strict=True))
        result["throughput_per_s"] = round(total / elapsed, 1)
        result["replica_cpu_cores"] = round((sum(cpu1) - sum(cpu0)) / elapsed, 2)
        result["sim_cpu_cores"] = round((sim1 - sim0) / elapsed, 2)
        per = []
        for r, m in zip(reps, after, strict=True):
            per.append({
                "replica": r.name,
                "sharder": bool(r.m(m, "watchkeeper_sharder")),
                "watch_events": int(r.m(m, "watchkeeper_watch_events_total")),
                "sharder_events": int(r.m(m, "watchkeeper_sharder_watch_events_total")),
                "cached": int(r.m(m, "watchkeeper_store_objects")),
                "owned": int(r.m(m, "watchkeeper_shard_owned_objects")),
                "rss_mib": round(_rss_kb(r.pid) / 1024, 1),
                "label_writes": int(r.m(m, "watchkeeper_sharder_label_writes_total")),
            })
        result["per_replica"] = per
        if n > 1 and not _no_failover(a):
            await _failover(reps, ring, a, sim, tmp, result)
    finally:
        for r in reps:
            await r.kill(signal.SIGTERM)
    return result


async def _failover(reps: list[Replica], ring: str, a: argparse.Namespace, sim: SimProcess,
                    tmp: Path, result: dict[str, Any]) -> None:
    """kill -9 the sharder replica; time until each of its objects was reconciled by a
    survivor; then a new replica joins; time until the ring rebalanced."""
    import watchkeeper as wk

    ms = await _sample(reps)
    sharder = [bool(r.m(m, "watchkeeper_sharder")) for r, m in zip(reps, ms, strict=True)]
    victim = next((r for r, s in zip(reps, sharder, strict=True) if s == (a.kill == "sharder")),
                  reps[0])
    result["killed_was_sharder"] = sharder[reps.index(victim)]
    client = wk.Client(wk.ClientConfig.from_kubeconfig(str(sim.kubeconfig)))
    try:
        api = client.api("configmaps", namespace=NAMESPACE)
        owned = await api.list_all(label_selector=f"shard.watchkeeper.io/{ring}={victim.name}")
        orphans = {o["metadata"]["name"] for o in owned.items}
    finally:
        await client.close()
    survivors = [r for r in reps if r is not victim]
    killed = time.time()
    await victim.kill()
    result["killed"] = victim.name
    result["orphans"] = len(orphans)

    def adopted() -> dict[str, float]:
        first: dict[str, float] = {}
        for r in survivors:
            for name, times in r.first_times().items():
                later = [t for t in times if t > killed]
                if name in orphans and later:
                    first[name] = min(first.get(name, later[0]), min(later))
        return first

    async def all_adopted() -> bool:
        return len(adopted()) == len(orphans)

    await _wait(all_adopted, a.timeout, "orphans reconciled by survivors")
    times = sorted(t - killed for t in adopted().values())
    result["recovery_first_s"] = round(times[0], 2)
    result["recovery_median_s"] = round(times[len(times) // 2], 2)
    result["recovery_all_s"] = round(times[-1], 2)
    result["lease_duration_s"] = a.lease
    # A new replica joins: the ring rebalances through the drain.
    joiner = Replica(f"replica-{len(reps)}", ring, a, tmp, sim.kubeconfig)
    reps.append(joiner)
    joined = time.monotonic()
    await joiner.start()
    live = [*survivors, joiner]
    await _wait(lambda: _settled(live, a.objects, balanced=True), a.timeout, "rebalance")
    result["rebalance_s"] = round(time.monotonic() - joined - 1.0, 2)
    ms = await _sample(live)
    result["after_rebalance_owned"] = {
        r.name: int(r.m(m, "watchkeeper_shard_owned_objects"))
        for r, m in zip(live, ms, strict=True)}
    result["drain_writes"] = sum(_drain_writes(m) for m in ms)


def _no_failover(a: argparse.Namespace) -> bool:
    return bool(a.no_failover)


def _drain_writes(m: dict[str, float]) -> int:
    return int(sum(v for k, v in m.items()
                   if k.startswith("watchkeeper_sharder_label_writes_total") and "drain" in k))


def _keep_logs(tmp: Path, keep: Path) -> None:
    """(Once, after the measurement.)"""
    keep.mkdir(parents=True, exist_ok=True)
    for f in tmp.iterdir():
        shutil.copy(f, keep / f.name)


async def _main(a: argparse.Namespace) -> int:
    scenarios: list[dict[str, Any]] = []
    with SimProcess(history=max(200_000, 10 * a.objects)) as sim, \
            tempfile.TemporaryDirectory(prefix="wk-shard-") as tmpdir:
        seeded = sim.call("seed", namespace=NAMESPACE, count=a.objects)
        print(f"seeded {a.objects} ConfigMaps ({seeded.get('bytes_per_list_item')} bytes per "
              "list item)", file=sys.stderr)
        for n in a.replicas:
            res = await _scenario(n, a, sim, Path(tmpdir))
            print(json.dumps(res), file=sys.stderr)
            scenarios.append(res)
        if a.keep_logs:
            _keep_logs(Path(tmpdir), Path(a.keep_logs))
    rows = []
    for s in scenarios:
        for p in s["per_replica"]:
            rows.append([s["replicas"], p["replica"] + (" (sharder)" if p["sharder"] else ""),
                         f"{p['watch_events']:,}", f"{p['cached']:,}", f"{p['rss_mib']:.0f}",
                         f"{p['sharder_events']:,}", f"{p['label_writes']:,}"])
    print(markdown_table(["replicas", "replica", "controller watch events", "objects cached",
                          "RSS MiB", "sharder watch events", "sharder label writes"], rows))
    print()
    print(markdown_table(
        ["replicas", "settle s", "reconciles/s", "replica CPU cores", "simulator CPU cores"],
        [[s["replicas"], s["settle_s"], f"{s['throughput_per_s']:,.0f}",
          s["replica_cpu_cores"], s["sim_cpu_cores"]] for s in scenarios]))
    for s in scenarios:
        if "recovery_all_s" in s:
            what = "the sharder" if s["killed_was_sharder"] else "not the sharder"
            print(f"\nkill -9 {s['killed']} ({what}, {s['orphans']} objects, lease "
                  f"{s['lease_duration_s']} s): first orphan reconciled after "
                  f"{s['recovery_first_s']} s, median {s['recovery_median_s']} s, all after "
                  f"{s['recovery_all_s']} s; a new replica joined and the ring rebalanced in "
                  f"{s['rebalance_s']} s: {s['after_rebalance_owned']}")
    path = save_results(f"sharding-{a.reconcile}", {"args": vars(a), "scenarios": scenarios})
    print(f"\nresults: {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=30_000)
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    p.add_argument("--window", type=float, default=10.0, help="throughput window, seconds")
    p.add_argument("--reconcile", choices=["io", "cpu", "api"], default="io",
                   help="io: await --work s; cpu: compute --work s; api: GET the object")
    p.add_argument("--work", type=float, default=0.01, help="seconds of work per reconcile")
    p.add_argument("--concurrency", type=int, default=16, help="reconciles at once, per replica")
    p.add_argument("--requeue", type=float, default=2.0, help="requeue after, seconds")
    p.add_argument("--no-failover", action="store_true", help="skip kill -9 and rejoin")
    p.add_argument("--kill", choices=["sharder", "member"], default="sharder",
                   help="kill -9 the sharder replica (worst case) or another one")
    p.add_argument("--lease", type=float, default=15.0)
    p.add_argument("--renew", type=float, default=10.0)
    p.add_argument("--retry", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--keep-logs", metavar="DIR", help="copy each replica's log and reconcile "
                   "log here (to read the timeline of a fail-over)")
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
