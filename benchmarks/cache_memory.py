"""Peak RSS of a process that caches N ConfigMaps (default 100,000), one client per process,
all in one run against the same simulator.

* ``watchkeeper``: ``wk.reflector`` over ``wk.watcher`` into a ``wk.Store`` (dicts), until
  the store is ready (the paginated list done and the watch open).
* ``watchkeeper-lazy-strip``: the same with ``lazy_decode`` and ``strip_managed_fields``.
* ``kubernetes``: the official client's informer pattern (it ships no informer): a paginated
  LIST (limit 500) of ``V1ConfigMap`` models into a dict keyed by namespace/name, then a
  watch opened from the list's resourceVersion.
* ``kopf``: a kopf operator with an ``@kopf.index`` holding each ConfigMap's body, until the
  index holds N entries.

Reported: peak RSS (VmHWM) and RSS after imports, so the cache's own cost is the difference.

    python -m benchmarks.cache_memory [--objects 100000] [--clients a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from benchmarks._common import (
    ROOT,
    ChildReport,
    fmt_mib,
    fmt_num,
    markdown_table,
    rss_kb,
    run_child,
    save_results,
)

NAMESPACE = "mem"
CLIENTS = {
    "watchkeeper": "watchkeeper reflector -> Store (dicts)",
    "watchkeeper-lazy-strip": "watchkeeper reflector, lazy_decode + strip_managed_fields",
    "kubernetes": "kubernetes (official): paged LIST of models into a dict + watch",
    "kopf": "kopf operator, @kopf.index of each body",
}


def _c_watchkeeper(a: argparse.Namespace, lazy_strip: bool = False) -> int:
    import watchkeeper as wk

    async def main() -> int:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            store, writer = wk.Store.new()
            cfg = wk.WatchConfig(lazy_decode=lazy_strip, strip_managed_fields=lazy_strip)

            async def pump() -> None:
                async for _ in wk.reflector(writer, wk.watcher(api, cfg)):
                    pass

            task = asyncio.create_task(pump())
            try:
                await store.wait_until_ready(timeout=a.timeout)
                await asyncio.sleep(0.5)
                return len(store)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    return asyncio.run(main())


def _c_kubernetes(a: argparse.Namespace) -> int:
    from kubernetes import client, config, watch

    api_client = config.new_client_from_config(config_file=a.kubeconfig)
    v1 = client.CoreV1Api(api_client)
    cache: dict[tuple[str, str], Any] = {}
    token = None
    rv = ""
    while True:
        page = v1.list_namespaced_config_map(a.namespace, limit=500, _continue=token)
        rv = rv or page.metadata.resource_version
        for item in page.items:
            cache[(item.metadata.namespace, item.metadata.name)] = item
        token = page.metadata._continue
        if not token:
            break
    w = watch.Watch()
    for _ev in w.stream(v1.list_namespaced_config_map, a.namespace, resource_version=rv,
                        timeout_seconds=1):
        pass
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

    @kopf.index("v1", "configmaps")
    def by_name(namespace: str, name: str, body: Any, **_: Any) -> Any:
        keys.add((namespace, name))  # names only: the index itself holds the bodies
        return {(namespace, name): body}

    async def watch_size() -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.timeout and len(keys) < a.objects:
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # let the index take the last ones in
        stop.set()

    async def main() -> None:
        waiter = asyncio.create_task(watch_size())
        await kopf.operator(standalone=True, namespaces=[a.namespace], stop_flag=stop)
        await waiter

    asyncio.run(main())
    return len(keys)


RUNNERS = {
    "watchkeeper": lambda a: _c_watchkeeper(a),
    "watchkeeper-lazy-strip": lambda a: _c_watchkeeper(a, lazy_strip=True),
    "kubernetes": _c_kubernetes,
    "kopf": _c_kopf,
}
IMPORTS = {
    "watchkeeper": ["watchkeeper"],
    "watchkeeper-lazy-strip": ["watchkeeper"],
    "kubernetes": ["kubernetes", "kubernetes.client"],
    "kopf": ["kopf"],
}


def child_main(a: argparse.Namespace) -> None:
    report = ChildReport(a.child)
    for mod in IMPORTS[a.child]:
        __import__(mod)
    report.rss_base_kb = rss_kb()
    t0, count = time.perf_counter(), 0
    try:
        count = RUNNERS[a.child](a)
    except BaseException as exc:  # a client that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    if report.ok and count < a.objects:
        report.ok, report.error = False, f"only {count} of {a.objects} objects cached"
    report.extra = {"objects": count, "wall_s": time.perf_counter() - t0,
                    "rss_end_kb": rss_kb()}
    report.emit()


def run(objects: int, clients: list[str], timeout: float) -> dict[str, Any]:
    from benchmarks._server import SimProcess

    results = []
    with SimProcess(history=objects + 1000) as sim:
        seeded = sim.call("seed", namespace=NAMESPACE, count=objects)
        sim.call("list_cache", on=True)
        print(f"# memory: {objects} ConfigMaps seeded in {seeded['seconds']:.1f} s "
              f"({seeded['bytes_per_list_item']} bytes per list item)", file=sys.stderr)
        kc = str(sim.kubeconfig)
        for name in clients:
            res = run_child("cache_memory", ["--child", name, "--kubeconfig", kc,
                                             "--objects", str(objects),
                                             "--timeout", str(timeout)],
                            timeout=timeout + 60, server_pid=sim.pid, quiet=False,
                            env={"KUBECONFIG": kc, "PYTHONPATH": str(ROOT / "src")})
            res.update(client=name, label=CLIENTS[name])
            results.append(res)
            print(f"# memory {name:<24} " + (
                f"peak {res['rss_peak_kb'] / 1024:.0f} MiB, after import "
                f"{res['rss_base_kb'] / 1024:.0f} MiB, {res['wall_s']:.1f} s"
                if res.get("ok") else f"FAILED {res.get('error')}"), file=sys.stderr)
    return {"objects": objects, "bytes_per_list_item": seeded["bytes_per_list_item"],
            "results": results}


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        if not r.get("ok"):
            rows.append([r["label"], "FAILED", "—", "—", "—", (r.get("error") or "")[:100]])
            continue
        cache_kb = r["rss_peak_kb"] - r["rss_base_kb"]
        rows.append([r["label"], fmt_mib(r["rss_peak_kb"]), fmt_mib(r["rss_base_kb"]),
                     fmt_mib(cache_kb), fmt_num(cache_kb * 1024 / data["objects"]),
                     fmt_num(r["wall_s"], 1)])
    return markdown_table(["client", "peak RSS MiB", "RSS after import MiB",
                           "peak - import MiB", "bytes per object", "wall s"], rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child_main(a)
        return
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    data = run(a.objects, clients, a.timeout)
    path = save_results("cache-memory", data)
    print(table(data))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
