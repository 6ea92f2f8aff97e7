"""Memory per cached object: the RSS a process needs to cache N objects (default 100,000),
ConfigMaps or realistic Pods, one client per process, all in one run against the same
simulator; with each client's cost of reading one cached object, and for watchkeeper the
peak of a forced relist.

* ``watchkeeper``: ``wk.reflector`` over ``wk.watcher`` into a ``wk.Store`` (whatever Store
  the tree has), default settings, until the store is ready (the paginated list done and the
  watch open).
* ``watchkeeper-lazy-strip``: the same with ``lazy_decode`` and ``strip_managed_fields``.
* ``watchkeeper-meta``: the same with ``metadata_only=True`` (PartialObjectMetadata), whose
  ratio is taken against the JSON of the objects' ``metadata``.
* ``kubernetes``: the official client's informer pattern (it ships no informer): a paginated
  LIST (limit 500) of ``V1ConfigMap`` / ``V1Pod`` models into a dict keyed by
  namespace/name, then a watch opened from the list's resourceVersion.
* ``kopf``: a kopf operator with an ``@kopf.index`` holding each object's body, until the
  index holds N entries (or the timeout: then the figures are per object it holds).

``--kind pods``: 100,000 distinct Pods made by ``benchmarks._pod_corpus`` from the Pods a
real kube-apiserver 1.28.7 + kube-controller-manager made from 300 Deployments
(``benchmarks/data/``), renamed as ~20,000 Deployments' Pods.

Per client: RSS after imports (the baseline), peak RSS (VmHWM) until the cache is full,
and the RSS once it is full (after a ``gc.collect()``: the steady state); bytes per object =
(steady - baseline) / objects, and its ratio to the JSON bytes of one LIST item.

*Access*: the median time of one read of a random cached object as a dict (``store.get``
for watchkeeper, ``model.to_dict()`` for the official client) and of one field of it
(``["spec"]...`` / ``.spec...``), each call timed alone, 5,000 reads.

*Relist* (watchkeeper clients): VmHWM is reset (``/proc/self/clear_refs``), one Namespace is
created (the resourceVersion moves on, the watched objects do not change), the simulator
compacts its history and ends the watch, so the watcher's resume gets 410 Gone and it lists
everything again; the peak RSS until the relist's ``InitDone`` / the steady-state RSS
before it.

    python -m benchmarks.cache_memory [--kind configmaps|pods] [--objects 100000]
        [--clients a,b] [--timeout 600]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    ChildReport,
    fmt_mib,
    fmt_num,
    markdown_table,
    peak_rss_kb,
    rss_kb,
    run_child,
    save_results,
)

NAMESPACE = "mem"
KINDS = {"configmaps": "ConfigMaps", "pods": "Pods"}
CLIENTS = {
    "watchkeeper": "watchkeeper reflector -> Store, defaults",
    "watchkeeper-lazy-strip": "watchkeeper reflector, lazy_decode + strip_managed_fields",
    "watchkeeper-meta": "watchkeeper reflector, metadata_only",
    "kubernetes": "kubernetes (official): paged LIST of models into a dict + watch",
    "kopf": "kopf operator, @kopf.index of each body",
}
READS = 5_000
EXTRA: dict[str, Any] = {}  # what a child adds to its report


def _timed(fn: Callable[[Any], Any], keys: list[Any]) -> float:
    """Median µs of ``fn(key)``, each call timed alone."""
    clock = time.perf_counter_ns
    samples = []
    for key in keys:
        t0 = clock()
        fn(key)
        samples.append(clock() - t0)
    return statistics.median(samples) / 1000


def _field(obj: dict[str, Any], kind: str) -> Any:
    """One nested field, as a reconcile would read it."""
    if kind == "pods":
        return obj["spec"]["containers"][0]["image"]
    return obj["metadata"]["labels"]["tier"]


def _post(url: str) -> None:
    req = urllib.request.Request(url, method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: "5" to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _c_watchkeeper(a: argparse.Namespace, **cfg_args: Any) -> int:
    import watchkeeper as wk

    async def main() -> int:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api(a.kind, namespace=a.namespace)
            store, writer = wk.Store.new()
            cfg = wk.WatchConfig(**cfg_args)
            lists = [0]
            listed = asyncio.Event()

            async def pump() -> None:
                async for ev in wk.reflector(writer, wk.watcher(api, cfg)):
                    if isinstance(ev, wk.InitDone):
                        lists[0] += 1
                        listed.set()

            task = asyncio.create_task(pump())
            try:
                await store.wait_until_ready(timeout=a.timeout)
                await asyncio.sleep(0.5)
                count = len(store)
                gc.collect()
                EXTRA["rss_ready_kb"] = rss_kb()
                EXTRA["peak_list_kb"] = peak_rss_kb()
                # keys(), not list(): a Store that keeps objects encoded would decode them all
                keys = random.Random(1).choices(store.keys(), k=READS)
                EXTRA["read_us"] = _timed(lambda k: store.get(k[1], namespace=k[0]), keys)
                if not cfg_args.get("metadata_only"):
                    EXTRA["field_us"] = _timed(
                        lambda k: _field(store.get(k[1], namespace=k[0]) or {}, a.kind), keys)
                del keys
                if a.relist and a.sim_url:
                    await relist(client, lists, listed)
                return count
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def relist(client: wk.Client, lists: list[int], listed: asyncio.Event) -> None:
        """As after an etcd compaction: one unrelated write moves the resourceVersion on,
        the history is compacted past the watch's version, the watch ends; its resume gets
        410 Gone and the watcher lists everything again."""
        gc.collect()
        steady = rss_kb()
        if not _reset_peak():
            EXTRA["relist_error"] = "cannot reset VmHWM"
            return
        before, listed_before = lists[0], time.perf_counter()
        listed.clear()
        await client.api("namespaces").create(  # not a change of the watched objects
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"x-{a.child}"}})
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _post, f"{a.sim_url}/_sim/compact")
        await loop.run_in_executor(None, _post, f"{a.sim_url}/_sim/stop-watches")
        deadline = time.monotonic() + a.timeout
        while lists[0] == before and time.monotonic() < deadline:
            listed.clear()
            try:
                await asyncio.wait_for(listed.wait(), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
        if lists[0] == before:
            EXTRA["relist_error"] = "no relist within the timeout"
            return
        await asyncio.sleep(0.5)
        EXTRA.update(relist_steady_kb=steady, relist_peak_kb=peak_rss_kb(),
                     relist_after_kb=rss_kb(), relist_s=time.perf_counter() - listed_before)

    return asyncio.run(main())


def _c_kubernetes(a: argparse.Namespace) -> int:
    from kubernetes import client, config, watch

    api_client = config.new_client_from_config(config_file=a.kubeconfig)
    v1 = client.CoreV1Api(api_client)
    list_fn = v1.list_namespaced_pod if a.kind == "pods" else v1.list_namespaced_config_map
    cache: dict[tuple[str, str], Any] = {}
    token = None
    rv = ""
    while True:
        page = list_fn(a.namespace, limit=500, _continue=token)
        rv = rv or page.metadata.resource_version
        for item in page.items:
            cache[(item.metadata.namespace, item.metadata.name)] = item
        token = page.metadata._continue
        if not token:
            break
        del page
    w = watch.Watch()
    for _ev in w.stream(list_fn, a.namespace, resource_version=rv, timeout_seconds=1):
        pass
    gc.collect()
    EXTRA["rss_ready_kb"] = rss_kb()
    EXTRA["peak_list_kb"] = peak_rss_kb()
    keys = random.Random(1).choices(list(cache), k=READS)
    EXTRA["read_us"] = _timed(lambda k: cache[k].to_dict(), keys)
    if a.kind == "pods":
        EXTRA["field_us"] = _timed(lambda k: cache[k].spec.containers[0].image, keys)
    else:
        EXTRA["field_us"] = _timed(lambda k: cache[k].metadata.labels["tier"], keys)
    return len(cache)


def _c_kopf(a: argparse.Namespace) -> int:
    import logging

    import kopf

    logging.getLogger("kopf").setLevel(logging.WARNING)
    stop = asyncio.Event()
    keys: set[tuple[str, str]] = set()

    @kopf.on.startup()
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False

    @kopf.index("v1", a.kind)
    def by_name(namespace: str, name: str, body: Any, **_: Any) -> Any:
        keys.add((namespace, name))  # names only: the index itself holds the bodies
        return {(namespace, name): body}

    async def watch_size() -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.timeout and len(keys) < a.objects:
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # let the index take the last ones in
        gc.collect()
        EXTRA["rss_ready_kb"] = rss_kb()
        EXTRA["peak_list_kb"] = peak_rss_kb()
        stop.set()

    async def main() -> None:
        waiter = asyncio.create_task(watch_size())
        await kopf.operator(standalone=True, namespaces=[a.namespace], stop_flag=stop)
        await waiter

    asyncio.run(main())
    return len(keys)


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "watchkeeper": lambda a: _c_watchkeeper(a),
    "watchkeeper-lazy-strip": lambda a: _c_watchkeeper(a, lazy_decode=True,
                                                       strip_managed_fields=True),
    "watchkeeper-meta": lambda a: _c_watchkeeper(a, metadata_only=True),
    "kubernetes": _c_kubernetes,
    "kopf": _c_kopf,
}
IMPORTS = {
    "watchkeeper": ["watchkeeper"],
    "watchkeeper-lazy-strip": ["watchkeeper"],
    "watchkeeper-meta": ["watchkeeper"],
    "kubernetes": ["kubernetes", "kubernetes.client"],
    "kopf": ["kopf"],
}


def child_main(a: argparse.Namespace) -> None:
    report = ChildReport(a.child)
    for mod in IMPORTS[a.child]:
        __import__(mod)
    gc.collect()
    report.rss_base_kb = rss_kb()
    t0, count = time.perf_counter(), 0
    try:
        count = RUNNERS[a.child](a)
    except BaseException as exc:  # a client that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    partial = report.ok and count < a.objects
    report.extra = {"objects": count, "partial": partial, "wall_s": time.perf_counter() - t0,
                    "rss_end_kb": rss_kb(), **EXTRA}
    report.emit()


def run(kind: str, objects: int, clients: list[str], timeout: float,
        relist: bool) -> dict[str, Any]:
    from benchmarks._server import SimProcess

    results = []
    with SimProcess(history=objects + 1000) as sim:
        if kind == "pods":
            seeded = sim.call("seed_pods", namespace=NAMESPACE, count=objects)
        else:
            seeded = sim.call("seed", namespace=NAMESPACE, count=objects)
        # No list cache: a relist after a compaction must get a new resourceVersion, and a
        # metadata-only LIST a different body for the same URL.
        print(f"# memory: {objects} {kind} seeded in {seeded['seconds']:.1f} s "
              f"({seeded['bytes_per_list_item']} bytes per list item, "
              f"{seeded['metadata_bytes_per_item']} of metadata)", file=sys.stderr)
        kc = str(sim.kubeconfig)
        for name in clients:
            args = ["--child", name, "--kubeconfig", kc, "--kind", kind,
                    "--objects", str(objects), "--timeout", str(timeout),
                    "--sim-url", sim.url]
            if not relist:
                args.append("--no-relist")
            res = run_child("cache_memory", args, timeout=2 * timeout + 120,
                            server_pid=sim.pid, quiet=False,
                            env={"KUBECONFIG": kc, "PYTHONPATH": str(ROOT / "src")})
            res.update(client=name, label=CLIENTS[name])
            results.append(res)
            print(f"# memory {name:<24} " + (
                f"ready {res['rss_ready_kb'] / 1024:.0f} MiB, peak {res['peak_list_kb'] / 1024:.0f}"
                f" MiB, after import {res['rss_base_kb'] / 1024:.0f} MiB, "
                f"{res['objects']} objects, {res['wall_s']:.1f} s"
                if res.get("ok") else f"FAILED {res.get('error')}"), file=sys.stderr)
    return {"kind": kind, "objects": objects,
            "bytes_per_list_item": seeded["bytes_per_list_item"],
            "metadata_bytes_per_item": seeded["metadata_bytes_per_item"],
            "results": results}


def _per_object(r: dict[str, Any], key: str) -> float:
    return float(r[key] - r["rss_base_kb"]) * 1024 / max(r["objects"], 1)


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        label = r["label"] + (f" (at {r['objects']:,} objects)" if r.get("partial") else "")
        if not r.get("ok"):
            rows.append([label, "FAILED", "—", "—", "—", "—", "—", "—",
                         (r.get("error") or "")[:100]])
            continue
        json_bytes = data["metadata_bytes_per_item" if r["client"] == "watchkeeper-meta"
                          else "bytes_per_list_item"]
        steady = _per_object(r, "rss_ready_kb")
        # a client that did not finish may hold more than the objects it counted (kopf keeps
        # the whole LIST while its index fills): no per-object figure for it
        per = ["—", "—", "—"] if r.get("partial") else [
            fmt_num(steady), f"{steady / json_bytes:.2f}x",
            fmt_num(_per_object(r, "peak_list_kb"))]
        rows.append([label, fmt_mib(r["rss_base_kb"]), fmt_mib(r["rss_ready_kb"]),
                     fmt_mib(r["peak_list_kb"]), per[0], fmt_num(json_bytes), per[1], per[2],
                     fmt_num(r["wall_s"], 1)])
    return markdown_table(["client", "RSS after import MiB", "RSS ready MiB", "peak RSS MiB",
                           "bytes/object (ready - import)", "JSON bytes/object",
                           "x JSON", "bytes/object (peak - import)", "wall s"], rows)


def access_table(data: dict[str, Any]) -> str:
    rows = [[r["label"], fmt_num(r.get("read_us"), 2), fmt_num(r.get("field_us"), 2)]
            for r in data["results"] if r.get("ok") and "read_us" in r]
    return markdown_table(["client", "read one object as a dict µs (median)",
                           "read one field µs (median)"], rows)


def relist_table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        if not r.get("ok") or not ("relist_peak_kb" in r or "relist_error" in r):
            continue
        if "relist_error" in r:
            rows.append([r["label"], "—", "—", "—", "—", r["relist_error"]])
            continue
        rows.append([r["label"], fmt_mib(r["relist_steady_kb"]), fmt_mib(r["relist_peak_kb"]),
                     f"{r['relist_peak_kb'] / r['relist_steady_kb']:.2f}x",
                     fmt_mib(r["relist_after_kb"]), fmt_num(r["relist_s"], 1)])
    return markdown_table(["client", "steady RSS MiB", "relist peak RSS MiB", "peak / steady",
                           "RSS after relist MiB", "relist s"], rows)


def print_tables(data: dict[str, Any]) -> None:
    print(f"## {data['objects']:,} {KINDS[data['kind']]}: {data['bytes_per_list_item']:,} "
          f"bytes of JSON per list item, {data['metadata_bytes_per_item']:,} of metadata\n")
    print(table(data))
    print("\n### Access\n")
    print(access_table(data))
    print("\n### Relist\n")
    print(relist_table(data))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kind", choices=list(KINDS), default="configmaps")
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--no-relist", dest="relist", action="store_false",
                   help="skip the forced relist of the watchkeeper clients")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--sim-url", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    p.add_argument("--report", metavar="JSON",
                   help="print the tables of a saved result (benchmarks/results/...) and exit")
    a = p.parse_args(argv)
    if a.report:
        print_tables(json.loads(Path(a.report).read_text()))
        return
    if a.child:
        child_main(a)
        return
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        p.error(f"unknown clients: {', '.join(unknown)} (known: {', '.join(CLIENTS)})")
    t0 = time.perf_counter()
    data = run(a.kind, a.objects, clients, a.timeout, a.relist)
    data["run_s"] = time.perf_counter() - t0
    path = save_results(f"cache-memory-{a.kind}", data)
    print_tables(data)
    print(f"\nresults: {path} (run {data['run_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
