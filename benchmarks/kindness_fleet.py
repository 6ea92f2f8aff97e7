"""Kindness as a fleet: 10 watchers of 10 different resources on one Client, one outage.

The watchers watch Secrets, ConfigMaps, Services, Pods, ServiceAccounts, Events, Leases,
Deployments, StatefulSets and Jobs in one namespace (``--namespaces``: ConfigMaps in 10
namespaces instead, as runs before 2026-12-05 did).

The simulator refuses every connection for ``--duration`` seconds in its accept-and-reset
form (``refuse(count_refused=True)``), so each connection attempt is counted. Reported per
run: attempts during the outage, seconds from the fault's end to all 10 watches open again,
and seconds from the circuit's close (the first successful request) to all 10 open. With
``--forbid-one`` the first collection (Secrets: what RBAC most often withholds) answers 403
from the fault's end on: the other nine must come back as fast. ``--probe-max S`` sets the
circuit's probe-step cap (``none``: the watcher's backoff alone), to show what the cap
trades. ``--extra-max S`` ends each outage 0..S s later (run i at random in the i-th of
``--runs`` equal slices; attempts still counted over ``--duration``), so the server returns
at any moment of the probe schedule, not only at 60 s, where the default schedule tends to
probe. Real time, simulator and client in this process, 127.0.0.1 only. Writes
benchmarks/results/kindness-fleet[-namespaces][-403][-probe-max-S][-random-end]-<time>.json.

    PYTHONPATH=src:sim python -m benchmarks.kindness_fleet [--duration 60] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import watchkeeper as wk
from benchmarks._common import save_results
from watchkeeper.client.circuit import PROBE_MAX, CircuitState
from watchkeeper_sim import ApiServer

NAMESPACE = "fleet"
RESOURCES = ["secrets", "configmaps", "services", "pods", "serviceaccounts", "events",
             "leases.coordination.k8s.io", "deployments.apps", "statefulsets.apps", "jobs.batch"]
NAMESPACES = [f"team-{i}" for i in range(10)]


def _apis(client: wk.Client, by_namespace: bool) -> list[wk.Api]:
    """The ten watched collections; the first is the one ``--forbid-one`` forbids."""
    if by_namespace:
        return [client.api("configmaps", namespace=ns) for ns in NAMESPACES]
    return [client.api(r, namespace=NAMESPACE) for r in RESOURCES]


async def _consume(watch: wk.Watcher) -> None:
    async for _ in watch:
        pass


async def one_run(duration: float, forbid_one: bool, probe_max: float | None,
                  extra: float = 0.0, by_namespace: bool = False) -> dict[str, float]:
    async with ApiServer(bookmark_interval=30.0) as srv, srv.client() as client:
        client.circuit.probe_max = probe_max
        apis = _apis(client, by_namespace)
        forbidden = (await apis[0].resource()).path(apis[0].namespace)
        watches = [wk.watcher(api, wk.WatchConfig(max_unhealthy=None)) for api in apis]
        tasks = [asyncio.create_task(_consume(w)) for w in watches]
        try:
            while srv.open_watches < len(watches):
                await asyncio.sleep(0.01)
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            before = srv.connection_attempts
            await asyncio.sleep(duration)
            attempts = srv.connection_attempts - before
            await asyncio.sleep(extra)  # the return at another moment of the probe schedule
            srv.faults.clear()
            if forbid_one:
                srv.faults.error(403, "forbidden", path_prefix=forbidden)
            cleared = time.monotonic()
            closed: float | None = None
            want = len(watches) - (1 if forbid_one else 0)
            while srv.open_watches < want:
                if closed is None and client.circuit.state is CircuitState.CLOSED:
                    closed = time.monotonic()
                await asyncio.sleep(0.005)
            back = time.monotonic()
            if closed is None:
                closed = back
            return {"attempts": attempts, "outage": duration + extra,
                    "from_fault_end": back - cleared,
                    "from_first_success": back - closed}
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--forbid-one", action="store_true")
    ap.add_argument("--probe-max", default=str(PROBE_MAX),
                    help="the circuit's probe-step cap in seconds, or 'none'")
    ap.add_argument("--extra-max", type=float, default=0.0,
                    help="each outage lasts --duration plus 0..this many seconds (stratified) "
                         "(attempts still counted in the first --duration), so the server "
                         "returns at a random moment of the probe schedule")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--namespaces", action="store_true",
                    help="ConfigMaps in 10 namespaces instead of 10 resources in one")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    probe_max = None if args.probe_max == "none" else float(args.probe_max)
    rows = []
    for i in range(args.runs):
        # Stratified: run i ends in the i-th slice of 0..extra_max, at random within it, so a
        # few runs cover the probe schedule's phases evenly.
        extra = (i + rng.random()) * args.extra_max / args.runs
        r = await one_run(args.duration, args.forbid_one, probe_max, extra, args.namespaces)
        rows.append(r)
        print(f"run {i + 1}: outage {r['outage']:.1f} s, attempts {r['attempts']:.0f} "
              f"in the first {args.duration:g} s, all watching "
              f"{r['from_fault_end']:.2f} s after the fault ended, "
              f"{r['from_first_success']:.2f} s after the first success", flush=True)
    summary = {}
    for key in ("attempts", "from_fault_end", "from_first_success"):
        vals = [r[key] for r in rows]
        summary[key] = {"median": statistics.median(vals), "max": max(vals)}
        print(f"median {key}: {statistics.median(vals):.2f} (max {max(vals):.2f})")
    name = "kindness-fleet" + ("-namespaces" if args.namespaces else "") + (
        "-403" if args.forbid_one else "")
    if probe_max != PROBE_MAX:
        name += f"-probe-max-{args.probe_max}"
    if args.extra_max:
        name += "-random-end"
    path = save_results(name, {"duration": args.duration, "extra_max": args.extra_max,
                               "seed": args.seed, "forbid_one": args.forbid_one,
                               "probe_max": probe_max, "runs": rows, "summary": summary,
                               "watched": "configmaps in 10 namespaces" if args.namespaces
                               else RESOURCES})
    print(f"results: {path}")


if __name__ == "__main__":
    asyncio.run(main())
