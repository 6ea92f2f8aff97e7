"""Shared watches: two controllers on one resource, one watch and one cache (issue 13).

The simulator (its own process) is seeded with ``--objects`` ConfigMaps of ~1.1 KB. A child
process then runs two ``wk.Controller``s on those ConfigMaps (no-op reconcile) until both
have reconciled every object, and reports its resident set size (RSS, after a
``gc.collect()``) and the simulator's request log for the run:

* ``shared``: both controllers on one ``Client``: they share one watch and one Store
  (``wk.SharedWatches``, what a Controller does now);
* ``separate``: each controller on a ``Client`` of its own: two watches, two Stores, which
  is what two controllers in one process did before shared watches.

Rounds alternate the two modes (``--rounds``); the table shows the median of each column.

    python -m benchmarks.shared_watch [--objects 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from typing import Any

from benchmarks._common import ChildReport, markdown_table, rss_kb, run_child, save_results
from benchmarks._server import SimProcess

NAMESPACE = "shared"
MODES = {
    "shared": "two controllers, one Client (shared watch)",
    "separate": "two controllers, one Client each (not shared)",
}


async def _child(a: argparse.Namespace, report: ChildReport) -> None:
    import watchkeeper as wk

    config = wk.ClientConfig.from_kubeconfig(a.kubeconfig)
    clients = [wk.Client(config)]
    if a.child == "separate":
        clients.append(wk.Client(config))
    seen: list[set[str]] = [set(), set()]
    done = asyncio.Event()

    def reconciler(i: int) -> Any:
        def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            seen[i].add(obj["metadata"]["name"])
            if all(len(s) >= a.objects for s in seen):
                done.set()
            return wk.Action.await_change()

        return reconcile

    cfg = wk.ControllerConfig(handle_signals=False)
    controllers = [
        wk.Controller(clients[i % len(clients)].api("configmaps", namespace=NAMESPACE), cfg)
        for i in range(2)
    ]
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(c.run(reconciler(i))) for i, c in enumerate(controllers)]
    await asyncio.wait_for(done.wait(), a.timeout)
    report.extra["seconds"] = time.perf_counter() - t0
    gc.collect()
    report.extra["rss_kb"] = rss_kb()
    report.extra["stores"] = len({id(c.store) for c in controllers})
    report.extra["cached"] = sum(len(s) for s in {id(c.store): c.store for c in controllers}
                                 .values())
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for client in clients:
        await client.close()


def child_main(a: argparse.Namespace) -> int:
    import watchkeeper  # noqa: F401  (imports before the baseline, like the other benchmarks)

    gc.collect()
    report = ChildReport(client=a.child, rss_base_kb=rss_kb())
    try:
        asyncio.run(_child(a, report))
    except Exception as exc:  # reported to the parent, which prints it
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"
    report.emit()
    return 0 if report.ok else 1


def parent_main(a: argparse.Namespace) -> int:
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with SimProcess(history=a.objects + 1000) as sim:
        seeded = sim.call("seed", namespace=NAMESPACE, count=a.objects)
        print(f"seeded {a.objects} ConfigMaps ({seeded['bytes_per_list_item']} bytes of JSON "
              f"per list item)", file=sys.stderr)
        for r in range(a.rounds):
            for mode in MODES:
                since = sim.call("requests")["now"]
                res = run_child("shared_watch", [
                    "--child", mode, "--kubeconfig", str(sim.kubeconfig),
                    "--objects", str(a.objects), "--timeout", str(a.timeout),
                ], timeout=a.timeout + 60, server_pid=sim.pid)
                if not res.get("ok"):
                    print(f"round {r + 1} {mode}: FAILED {res.get('error')}", file=sys.stderr)
                    return 1
                log = sim.call("requests", since=since)["by_verb_status"]
                res["watches"] = sum(n for k, n in log.items() if k.startswith("watch "))
                res["lists"] = sum(n for k, n in log.items() if k.startswith("list "))
                rows[mode].append(res)
                print(f"round {r + 1} {mode}: rss {res['rss_kb'] / 1024:.0f} MiB, "
                      f"{res['watches']} watch, {res['lists']} list pages", file=sys.stderr)
    table = []
    for mode, runs in rows.items():
        def med(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return statistics.median(float(x[key]) for x in runs)

        table.append([
            MODES[mode], f"{med('watches'):.0f}", f"{med('lists'):.0f}", f"{med('stores'):.0f}",
            f"{med('cached'):,.0f}", f"{med('rss_base_kb') / 1024:.0f}",
            f"{med('rss_kb') / 1024:.0f}", f"{(med('rss_kb') - med('rss_base_kb')) / 1024:.0f}",
            f"{med('seconds'):.2f}", f"{max(x['other_load'] for x in runs):.1f}",
        ])
    print(markdown_table(
        ["mode", "watch requests", "LIST pages", "Stores", "cached objects",
         "RSS after import MiB", "RSS both done MiB", "RSS growth MiB", "both done s",
         "other load (max)"],
        table,
    ))
    save_results("shared-watch", {"objects": a.objects, "rounds": a.rounds, "runs": rows})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--child", choices=list(MODES))
    p.add_argument("--kubeconfig")
    a = p.parse_args(argv)
    return child_main(a) if a.child else parent_main(a)


if __name__ == "__main__":
    raise SystemExit(main())
