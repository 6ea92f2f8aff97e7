"""Run the benchmark suite: LIST throughput, watch throughput, kindness under outages.

    python -m benchmarks.run_all                 # everything, full size (~25 minutes)
    python -m benchmarks.run_all --quick         # scaled down (~5 minutes)
    python -m benchmarks.run_all --only watch --events 50000
    python -m benchmarks.run_all --only kindness --duration 600   # the real 10-minute outage
    python -m benchmarks.run_all --only list,watch,kindness,controller   # add an optional one

``controller`` (Controller reconciles/s next to kopf, and Store memory per object) and
``webhooks`` (admission latency over TLS at 200 and 1,000 reviews/s next to kopf's webhook
server, ~5 minutes) are optional: each runs only when named in ``--only``.

Prints one markdown table per benchmark and writes benchmarks/results/run_all-<time>.json
(each benchmark also writes its own <name>-<time>.json and <name>-latest.json).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from benchmarks import (
    controller_throughput,
    kindness,
    list_throughput,
    watch_throughput,
    webhook_latency,
)
from benchmarks._common import machine, save_results, versions

BENCHMARKS = ("list", "watch", "kindness")
OPTIONAL = ("controller", "webhooks")  # run only when named in --only


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", default=",".join(BENCHMARKS),
                   help="comma-separated subset of: " + ", ".join((*BENCHMARKS, *OPTIONAL)))
    p.add_argument("--quick", action="store_true",
                   help="2,000 objects, 20,000 events, 15 s outages")
    p.add_argument("--objects", type=int,
                   help="LIST and controller: ConfigMaps (default 10,000)")
    p.add_argument("--runs", type=int, help="LIST: timed runs per client (default 5)")
    p.add_argument("--events", type=int, help="watch: modifications (default 100,000)")
    p.add_argument("--duration", type=float, help="kindness: outage seconds (default 60)")
    p.add_argument("--clients", help="only these clients, where a benchmark has them")
    a = p.parse_args(argv)
    only = [b.strip() for b in a.only.split(",") if b.strip()]
    if set(only) - set(BENCHMARKS) - set(OPTIONAL):
        p.error(f"--only takes: {', '.join((*BENCHMARKS, *OPTIONAL))}")
    objects = a.objects or (2_000 if a.quick else 10_000)
    runs = a.runs or (3 if a.quick else 5)
    events = a.events or (20_000 if a.quick else 100_000)
    duration = a.duration or (15.0 if a.quick else 60.0)
    wanted = [c.strip() for c in a.clients.split(",")] if a.clients else None

    def pick(known: dict[str, Any]) -> list[str] | None:
        if wanted is None:
            return None
        return [c for c in known if c in wanted or c.split("-")[0] in wanted
                or c.startswith(("raw-", "msgspec", "aiohttp"))]

    info = machine()
    print(f"# machine: {info['cpus']} CPUs ({info['cpu_model']}), {info['memory_gib']} GiB, "
          f"Python {info['python']}", file=sys.stderr)
    print("# versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()), file=sys.stderr)
    started = time.monotonic()
    out: dict[str, Any] = {"argv": sys.argv[1:], "quick": a.quick}
    tables: list[str] = []
    if "list" in only:
        data = list_throughput.run(objects, runs, pick(list_throughput.CLIENTS))
        save_results("list", data)
        out["list"] = data
        tables.append(f"## LIST: {objects:,} ConfigMaps, median of {runs} runs\n\n"
                      + list_throughput.table(data))
    if "watch" in only:
        data = watch_throughput.run(events, clients=pick(watch_throughput.CLIENTS))
        save_results("watch", data)
        out["watch"] = data
        tables.append(f"## Watch: {events:,} ConfigMap modifications replayed\n\n"
                      + watch_throughput.table(data))
    if "kindness" in only:
        data = kindness.run(duration, clients=pick(kindness.CLIENTS))
        save_results("kindness", data)
        out["kindness"] = data
        tables.append(f"## Kindness: {duration:.0f} s outages\n\n" + kindness.table(data))
    if "controller" in only:
        data = controller_throughput.run(objects, clients=pick(controller_throughput.CLIENTS))
        save_results("controller", data)
        out["controller"] = data
        tables.append(f"## Controller: {objects:,} ConfigMaps reconciled once, cache memory\n\n"
                      + controller_throughput.table(data))
    servers = pick(webhook_latency.SERVERS)
    if "webhooks" in only and servers != []:
        servers = list(webhook_latency.SERVERS) if servers is None else servers
        data = webhook_latency.run([200.0, 1000.0], 15.0, 3.0, 2, servers)
        save_results("webhook-latency", data)
        out["webhooks"] = data
        tables.append("## Webhooks: admission round trip over TLS, open loop\n\n"
                      + webhook_latency.table(data))
    out["elapsed_s"] = time.monotonic() - started
    path = save_results("run_all", out)
    print("\n\n".join(tables))
    print(f"\n# {out['elapsed_s'] / 60:.1f} minutes; results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
