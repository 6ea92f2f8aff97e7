"""Controller throughput and cache memory: watchkeeper's Controller against a kopf operator.

The simulator (its own process) is seeded with ``--objects`` ConfigMaps of ~1.1 KB. Each
client then runs in its own process against it and counts handler calls until every seeded
object has been handled once:

* ``watchkeeper``: ``wk.Controller(api, ControllerConfig(concurrency=4))`` with a no-op
  reconcile returning ``Action.await_change()``. Timed from ``Controller.run`` (it
  discovers the resource, lists, watches) to the N-th distinct object reconciled.
* ``watchkeeper-typed``: the same with a typed reconcile: ``wk.TypedController`` over
  ``wk.TypedApi(api, ConfigMap)`` (``ConfigMap``: a ``msgspec.Struct`` with a
  ``wk.ObjectMeta``, below), so each reconcile first converts the cached dict into one.
* ``kopf-event``: a kopf operator (embedded, ``kopf.operator(standalone=True)``) with a no-op
  ``@kopf.on.event``: kopf delivers every object of its initial list as an event, and an
  event handler keeps no state, so kopf writes nothing back. Posting of k8s Events is off.
* ``kopf-create``: the same with no-op ``@kopf.on.create`` and ``@kopf.on.resume`` handlers
  (default annotation storage; posting of k8s Events off). The seeded objects carry no
  kopf annotation, so kopf sees each as new: the create handler runs, then kopf PATCHes its
  ``last-handled-configuration`` annotation onto the object (one write per object, which
  comes back as a MODIFIED event that kopf processes again).

Each kopf run starts when ``kopf.operator`` is called (kopf lists inside it). The
simulator's request log tells what each client sent (``requests`` column).

* ``store-memory``: one process lists the ConfigMaps into ``wk.Store`` through
  ``wk.reflector(writer, wk.watcher(api))`` until ``store.wait_until_ready()``; bytes per
  cached object = (tracemalloc current after - before) / N, with full objects and with
  ``WatchConfig(metadata_only=True)``, next to the same objects as plain dicts decoded by
  msgspec from one JSON body, and the JSON size of one list item.

    python -m benchmarks.controller_throughput [--objects 10000] [--clients a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ChildReport,
    Meter,
    fmt_mib,
    fmt_num,
    markdown_table,
    rss_kb,
    run_child,
    save_results,
)

NAMESPACE = "ctrl"

CLIENTS: dict[str, str] = {
    "watchkeeper": "watchkeeper Controller, concurrency 4, no-op reconcile",
    "watchkeeper-typed": "watchkeeper TypedController, concurrency 4, no-op typed reconcile",
    "kopf-event": "kopf operator, no-op @kopf.on.event",
    "kopf-create": "kopf operator, no-op @kopf.on.create + @kopf.on.resume",
    "store-memory": "watchkeeper Store (reflector + watcher), tracemalloc",
}

EXTRA: dict[str, Any] = {}


# -- the clients (each in a child process) ------------------------------------------------------


def _c_watchkeeper(a: argparse.Namespace, m: Meter) -> int:
    return _watchkeeper(a, m, typed=False)


def _c_watchkeeper_typed(a: argparse.Namespace, m: Meter) -> int:
    return _watchkeeper(a, m, typed=True)


def _watchkeeper(a: argparse.Namespace, m: Meter, *, typed: bool) -> int:
    import watchkeeper as wk
    from benchmarks._typed_configmap import ConfigMap

    seen: set[str] = set()
    calls = 0
    stop = asyncio.Event()
    workers: dict[int, int] = {}

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        nonlocal calls
        if not calls:
            EXTRA["first_s"] = time.perf_counter() - m.wall0
        calls += 1
        task = id(asyncio.current_task())
        workers[task] = workers.get(task, 0) + 1
        seen.add(obj["metadata"]["name"])
        if len(seen) >= a.objects and not stop.is_set():
            m.stop()
            stop.set()
        return wk.Action.await_change()

    async def reconcile_typed(obj: ConfigMap, ctx: Any) -> wk.Action:
        nonlocal calls
        if not calls:
            EXTRA["first_s"] = time.perf_counter() - m.wall0
        calls += 1
        task = id(asyncio.current_task())
        workers[task] = workers.get(task, 0) + 1
        seen.add(obj.metadata.name or "")
        if len(seen) >= a.objects and not stop.is_set():
            m.stop()
            stop.set()
        return wk.Action.await_change()

    async def main() -> None:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            config = wk.ControllerConfig(handle_signals=False, concurrency=4)
            if typed:
                tctrl = wk.TypedController(wk.TypedApi(api, ConfigMap), config)
                ctrl = tctrl.controller
                m.start()
                async with asyncio.timeout(a.timeout):
                    await tctrl.run(reconcile_typed, stop=stop)
            else:
                ctrl = wk.Controller(api, config)
                m.start()
                async with asyncio.timeout(a.timeout):
                    await ctrl.run(reconcile, stop=stop)
            EXTRA["results"] = dict(ctrl.results)

    asyncio.run(main())
    EXTRA["handler_calls"] = calls
    EXTRA["calls_per_worker"] = sorted(workers.values(), reverse=True)
    return len(seen)


def _c_kopf(a: argparse.Namespace, m: Meter) -> int:
    import logging

    import kopf

    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    seen: set[str] = set()
    calls: dict[str, int] = {}
    stop = asyncio.Event()
    mode = a.child

    def hit(kind: str, name: str) -> None:
        if not calls:
            EXTRA["first_s"] = time.perf_counter() - m.wall0
        calls[kind] = calls.get(kind, 0) + 1
        seen.add(name)
        if len(seen) >= a.objects and not stop.is_set():
            m.stop()
            stop.set()

    @kopf.on.startup()
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # no k8s Events about handler success
        settings.watching.server_timeout = 600

    if mode == "kopf-event":
        @kopf.on.event("v1", "configmaps")
        async def on_event(name: str, **_: Any) -> None:
            hit("event", name)
    else:
        @kopf.on.create("v1", "configmaps")
        async def on_create(name: str, **_: Any) -> None:
            hit("create", name)

        @kopf.on.resume("v1", "configmaps")
        async def on_resume(name: str, **_: Any) -> None:
            hit("resume", name)

    async def main() -> None:
        m.start()
        task = asyncio.create_task(
            kopf.operator(standalone=True, namespaces=[a.namespace], stop_flag=stop))
        try:
            async with asyncio.timeout(a.timeout):
                await stop.wait()
            # kopf may still be writing its annotations: let it, bounded, to count them too
            if mode == "kopf-create":
                await asyncio.sleep(a.settle)
        finally:
            stop.set()
            async with asyncio.timeout(30):
                await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    EXTRA["handler_calls"] = sum(calls.values())
    EXTRA["calls_by_handler"] = calls
    return len(seen)


def _c_store_memory(a: argparse.Namespace, m: Meter) -> int:
    import gc
    import tracemalloc

    import msgspec

    import watchkeeper as wk

    example = json.loads(Path(a.example).read_text())
    n = a.objects

    async def cache(metadata_only: bool) -> tuple[float, float, int]:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            await api.resource()
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            store, writer = wk.Store.new()
            cfg = wk.WatchConfig(metadata_only=metadata_only)
            t0 = time.perf_counter()

            async def pump() -> None:
                async for _ in wk.reflector(writer, wk.watcher(api, cfg)):
                    pass

            task = asyncio.create_task(pump())
            try:
                await store.wait_until_ready(timeout=a.timeout)
                wall = time.perf_counter() - t0
                await asyncio.sleep(0.2)
                gc.collect()
                after = tracemalloc.get_traced_memory()[0]
                count = len(store)
                EXTRA[f"keys_{'meta' if metadata_only else 'full'}"] = sorted(
                    next(iter(store)).keys())
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return (after - before) / max(count, 1), wall, count

    def plain_dicts() -> float:
        """N copies of the example item, renamed, decoded from one JSON body by msgspec."""
        item = {k: v for k, v in example.items() if k not in ("kind", "apiVersion")}
        items = []
        for i in range(n):
            obj = json.loads(json.dumps(item))
            obj["metadata"]["name"] = f"cm-{i:06d}"
            obj["metadata"]["uid"] = f"{i:08d}" + obj["metadata"]["uid"][8:]
            items.append(obj)
        body = msgspec.json.encode({"kind": "ConfigMapList", "apiVersion": "v1",
                                    "metadata": {}, "items": items})
        del items
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        decoded = msgspec.json.decode(body)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        assert len(decoded["items"]) == n
        return (after - before) / n

    tracemalloc.start()
    m.start()
    full, full_wall, full_n = asyncio.run(cache(False))
    gc.collect()
    meta_only, meta_wall, meta_n = asyncio.run(cache(True))
    gc.collect()
    plain = plain_dicts()
    m.stop()
    tracemalloc.stop()
    EXTRA.update(store_bytes_per_object=full, store_list_wall_s=full_wall,
                 metadata_only_bytes_per_object=meta_only, metadata_only_list_wall_s=meta_wall,
                 metadata_only_objects=meta_n, plain_dict_bytes_per_object=plain)
    return min(full_n, meta_n)


RUNNERS = {
    "watchkeeper": _c_watchkeeper,
    "watchkeeper-typed": _c_watchkeeper_typed,
    "kopf-event": _c_kopf,
    "kopf-create": _c_kopf,
    "store-memory": _c_store_memory,
}
IMPORTS = {
    "watchkeeper": ["watchkeeper"],
    "watchkeeper-typed": ["watchkeeper", "benchmarks._typed_configmap"],
    "kopf-event": ["kopf"],
    "kopf-create": ["kopf"],
    "store-memory": ["watchkeeper", "msgspec"],
}


def child_main(a: argparse.Namespace) -> None:
    report = ChildReport(a.child)
    for mod in IMPORTS[a.child]:
        __import__(mod)
    report.rss_base_kb = rss_kb()
    m = Meter(a.server_pid)
    count = 0
    try:
        count = RUNNERS[a.child](a, m)
    except BaseException as exc:  # a client that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    if report.ok and count < a.objects:
        report.ok, report.error = False, f"only {count} of {a.objects} objects handled"
    report.extra = {
        "objects": count,
        "wall_s": m.wall,
        "cpu_s": m.cpu,
        "per_s": count / m.wall if m.wall > 0 else 0.0,
        "server_cpu_s": m.server_cpu,
        **EXTRA,
    }
    report.emit()


# -- the parent ---------------------------------------------------------------------------------


def run(objects: int = 10_000, clients: list[str] | None = None,
        timeout: float = 300.0) -> dict[str, Any]:
    import tempfile

    from benchmarks._server import SimProcess

    names = clients or list(CLIENTS)
    results: list[dict[str, Any]] = []
    with SimProcess(history=objects + 1000) as sim, \
            tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp:
        seeded = sim.call("seed", namespace=NAMESPACE, count=objects)
        example = Path(tmp) / "example.json"
        example.write_text(json.dumps(seeded["example"]))
        meta_item = {"metadata": seeded["example"]["metadata"]}
        seeded["bytes_per_metadata_item"] = len(json.dumps(meta_item, separators=(",", ":")))
        print(f"# controller: {objects} ConfigMaps seeded in {seeded['seconds']:.1f} s "
              f"({seeded['bytes_per_list_item']} bytes per list item)", file=sys.stderr)
        kc = str(sim.kubeconfig)
        for name in names:
            if name == "kopf-create":  # its annotations would change the others' objects
                continue
            results.append(_one(sim, name, kc, objects, timeout, example))
        if "kopf-create" in names:
            results.append(_one(sim, "kopf-create", kc, objects, timeout, example))
    return {"objects": objects, "namespace": NAMESPACE,
            "bytes_per_list_item": seeded["bytes_per_list_item"],
            "bytes_per_metadata_item": seeded["bytes_per_metadata_item"],
            "results": results}


def _one(sim: Any, name: str, kc: str, objects: int, timeout: float,
         example: Path) -> dict[str, Any]:
    since = sim.call("ping")["now"]
    res = run_child(
        "controller_throughput",
        ["--child", name, "--kubeconfig", kc, "--namespace", NAMESPACE,
         "--objects", str(objects), "--timeout", str(timeout), "--example", str(example),
         "--server-pid", str(sim.pid)],
        timeout=timeout + 60, env={"KUBECONFIG": kc}, server_pid=sim.pid,
    )
    log = sim.call("requests", since=since)
    res["requests"] = log["count"]
    res["requests_by_verb_status"] = log["by_verb_status"]
    res.update(client=name, label=CLIENTS[name])
    if res.get("ok"):
        print(f"# controller {name:<13} {fmt_num(res.get('per_s'))}/s  "
              f"cpu {res['cpu_s']:.2f} s  peak {res['rss_peak_kb'] / 1024:.0f} MiB  "
              f"requests {log['by_verb_status']}", file=sys.stderr)
    else:
        print(f"# controller {name:<13} FAILED: {res.get('error')}", file=sys.stderr)
    return res


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        if r["client"] == "store-memory":
            continue
        if not r.get("ok"):
            rows.append([r["label"], "FAILED", "—", "—", "—", "—", "—", "—",
                         (r.get("error") or "")[:160]])
            continue
        verbs = r.get("requests_by_verb_status") or {}
        rows.append([
            r["label"], fmt_num(r["per_s"]), fmt_num(r["wall_s"], 2), fmt_num(r["cpu_s"], 2),
            fmt_num(r.get("server_cpu_s"), 2), fmt_mib(r["rss_peak_kb"]),
            fmt_num(r.get("handler_calls")), ", ".join(f"{k}: {v:,}" for k, v in
                                                      sorted(verbs.items())),
            _note(r),
        ])
    out = markdown_table(
        ["client", "objects/s", "wall s", "client CPU s", "server CPU s", "peak RSS MiB",
         "handler calls", "requests (verb status: count)", "note"], rows)
    mem = next((r for r in data["results"] if r["client"] == "store-memory"), None)
    if mem is not None:
        if mem.get("ok"):
            mrows = [
                ["JSON of one list item", fmt_num(data["bytes_per_list_item"]), "—"],
                ["JSON of its metadata only", fmt_num(data["bytes_per_metadata_item"]), "—"],
                ["plain dicts (msgspec decode of one body)",
                 fmt_num(mem["plain_dict_bytes_per_object"]), "—"],
                ["wk.Store, full objects", fmt_num(mem["store_bytes_per_object"]),
                 fmt_num(mem["store_list_wall_s"], 2)],
                ["wk.Store, metadata_only=True",
                 fmt_num(mem["metadata_only_bytes_per_object"]),
                 fmt_num(mem["metadata_only_list_wall_s"], 2)],
            ]
            out += "\n\n" + markdown_table(
                ["per cached ConfigMap", "bytes/object", "list + ready s (tracemalloc on)"],
                mrows)
        else:
            out += f"\n\nstore memory FAILED: {mem.get('error')}"
    return out


def _note(r: dict[str, Any]) -> str:
    by = r.get("calls_by_handler")
    if by:
        return ", ".join(f"{k} {v:,}" for k, v in sorted(by.items()))
    res = r.get("results")
    if res:
        return ", ".join(f"{k} {v:,}" for k, v in res.items() if v)
    return ""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset")
    p.add_argument("--timeout", type=float, default=300.0, help="per client, seconds")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    p.add_argument("--example", help=argparse.SUPPRESS)
    p.add_argument("--settle", type=float, default=3.0, help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child_main(a)
        return
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        p.error(f"unknown clients: {', '.join(sorted(unknown))}; known: {', '.join(CLIENTS)}")
    data = run(a.objects, clients, a.timeout)
    path = save_results("controller", data)
    print(table(data))
    if a.json:
        print(json.dumps(data, indent=2))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
