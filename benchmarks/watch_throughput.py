"""Watch throughput: events/s through each client for 100,000 ConfigMap modifications.

The simulator (its own process) first makes ``--events`` modifications, round-robin over
``--objects`` ConfigMaps of ~1.1 KB, without any watcher open. Each client, in its own
process, then watches from the resourceVersion before them, so the server replays the whole
history as fast as it can write, and counts events until it has them all. Measured per
client: wall time from the watch request to the last event, events/s, client CPU seconds,
peak RSS, and the server's CPU seconds during the run.

The floors, on the same bytes: a raw socket reading the same watch (HTTP chunk framing
only, no JSON: this is also the server's own maximum rate), aiohttp's line reader plus
msgspec, and msgspec alone decoding the captured body from memory (no I/O).

kopf has no "start from this resourceVersion" option: it lists first. For it the harness
replaces the initial LIST with an empty one at the starting resourceVersion
(``fetching.fetch_objs``), so the same replay flows through its whole watch path. Our
``watcher`` starts there with its public ``resource_version=``. The rest of each client is
untouched. The ``-lazy`` rows use ``WatchConfig(lazy_decode=True)`` / ``Api.watch(lazy=True)``
and say what their consumer reads of each event.

    python -m benchmarks.watch_throughput [--events 100000] [--clients a,b] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import time
from collections.abc import Callable
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
    server_cpu_seconds,
)

NAMESPACE = "watch"
KINDS = ("ADDED", "MODIFIED", "DELETED")

CLIENTS: dict[str, str] = {
    "raw-socket-stock": "stock simulator (no fast replay): raw socket, no JSON",
    "raw-socket": "floor: raw socket + chunk framing, no JSON (= server max rate)",
    "aiohttp-readline": "floor: aiohttp readline + msgspec",
    "asyncio-floor": "floor: asyncio BufferedProtocol waking a coroutine per read, no JSON",
    "msgspec": "floor: msgspec decode of the captured bytes, no I/O",
    "watchkeeper-stream": "watchkeeper Api.watch stream (dicts)",
    "watchkeeper-watcher": "watchkeeper watcher (Apply events, dicts)",
    "watchkeeper-stream-lazy": "watchkeeper Api.watch(lazy=True), reads keys only",
    "watchkeeper-watcher-lazy": "watchkeeper watcher, lazy_decode, reads ev.name only",
    "watchkeeper-watcher-lazy-obj": "watchkeeper watcher, lazy_decode, reads every ev.obj",
    "kubernetes": "kubernetes (official) watch.Watch",
    "kubernetes_asyncio": "kubernetes_asyncio watch.Watch",
    "lightkube": "lightkube sync Client.watch",
    "lightkube-async": "lightkube AsyncClient.watch",
    "kr8s": "kr8s async api.watch",
    "kopf": "kopf operator, no-op @kopf.on.event",
}


# -- raw HTTP (the floors) ---------------------------------------------------------------------


def server_of(kc: str) -> tuple[str, int, str]:
    """(host, port, bearer token) of a plain-http kubeconfig's current context."""
    import yaml

    with open(kc) as f:
        doc = yaml.safe_load(f)
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
    server: str = cluster["server"]
    if not server.startswith("http://"):
        raise SystemExit(f"the raw floors need a plain-http simulator, got {server}")
    host, _, port = server[len("http://"):].rstrip("/").rpartition(":")
    return host, int(port), str(user.get("token", ""))


def raw_watch(kc: str, ns: str, rv: str, events: int, keep: bool,
              meter: Meter | None = None) -> tuple[bytes, int]:
    """Read a watch with a bare socket until ``events`` lines have arrived.

    Returns (the de-chunked body if ``keep`` else b"", bytes received). The only work per
    chunk is the chunk header and a C-level newline count."""
    host, port, token = server_of(kc)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    req = (
        f"GET /api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\nAccept: application/json\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()
    if meter is not None:
        meter.start()
    sock.sendall(req)
    buf = bytearray()
    received = 0
    recv = sock.recv

    def more() -> None:
        nonlocal received
        data = recv(1 << 20)
        if not data:
            raise ConnectionError(f"server closed the watch after {received} bytes")
        received += len(data)
        buf.extend(data)

    while (end := buf.find(b"\r\n\r\n")) < 0:
        more()
    head = bytes(buf[:end]).decode("latin-1")
    if not head.startswith("HTTP/1.1 200"):
        raise ConnectionError(f"watch refused: {head.splitlines()[0]}")
    if "chunked" not in head.lower():
        raise ConnectionError("expected a chunked watch response")
    pos = end + 4
    lines = 0
    out = bytearray()
    while lines < events:
        eol = buf.find(b"\r\n", pos)
        while eol < 0:
            more()
            eol = buf.find(b"\r\n", pos)
        size = int(buf[pos:eol].split(b";")[0], 16)
        if size == 0:
            raise ConnectionError(f"watch ended after {lines} events")
        start = eol + 2
        while len(buf) < start + size + 2:
            more()
        lines += buf.count(b"\n", start, start + size)
        if keep:
            out += buf[start:start + size]
        pos = start + size + 2
        if pos > 1 << 22:
            del buf[:pos]
            pos = 0
    if meter is not None:
        meter.stop()
    sock.close()
    return bytes(out), received


# -- the clients (each runs in a child process; ``m`` times request -> last event) ---------------

Runner = Callable[[argparse.Namespace, Meter], int]
EXTRA: dict[str, Any] = {}  # extra numbers a runner wants in its report


def _c_raw_socket(a: argparse.Namespace, m: Meter) -> int:
    raw_watch(a.kubeconfig, a.namespace, a.rv, a.events, keep=False, meter=m)
    return int(a.events)


def _c_asyncio_floor(a: argparse.Namespace, m: Meter) -> int:
    """The least an asyncio client does per read: a ``BufferedProtocol`` receives into one
    buffer and wakes the consuming coroutine through a future (two loop iterations per
    read, as in any asyncio reader that hands bytes to a coroutine). Events are counted as
    newlines that are not a chunk's CRLF; nothing is parsed. Meant for ``watch_cpu --pace``,
    where each event wakes the client: there it is the cost of the wake-ups alone."""
    host, port, token = server_of(a.kubeconfig)

    class Floor(asyncio.BufferedProtocol):
        def __init__(self) -> None:
            self.buf = bytearray(1 << 20)
            self.view = memoryview(self.buf)
            self.events = 0
            self.closed = False
            self.waiter: asyncio.Future[None] | None = None

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.view

        def buffer_updated(self, nbytes: int) -> None:
            got = self.view[:nbytes].tobytes()
            # LFs minus CRs (every CR here begins a CRLF; a CRLF split over two reads nets
            # out). bytes.count is a per-byte loop in CPython; replace of one byte is fast.
            self.events += len(got.replace(b"\r", b"")) - len(got.replace(b"\n", b""))
            self._wake()

        def connection_lost(self, exc: Exception | None) -> None:
            self.closed = True
            self._wake()

        def _wake(self) -> None:
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        m.start()
        transport, proto = await loop.create_connection(Floor, host, port)
        transport.write(
            f"GET /api/v1/namespaces/{a.namespace}/configmaps?watch=true&resourceVersion={a.rv}"
            f" HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        while proto.events < a.events and not proto.closed:
            proto.waiter = loop.create_future()
            await proto.waiter
        m.stop()
        transport.close()
        return min(proto.events, int(a.events))

    return asyncio.run(main())


def _c_aiohttp_readline(a: argparse.Namespace, m: Meter) -> int:
    import aiohttp
    import msgspec

    host, port, token = server_of(a.kubeconfig)
    decode = msgspec.json.Decoder().decode

    async def main() -> int:
        count = 0
        async with aiohttp.ClientSession() as s:
            m.start()
            async with s.get(
                f"http://{host}:{port}/api/v1/namespaces/{a.namespace}/configmaps",
                params={"watch": "true", "resourceVersion": a.rv},
                headers={"Authorization": f"Bearer {token}"},
                timeout=aiohttp.ClientTimeout(total=None),
            ) as resp:
                while count < a.events:
                    line = await resp.content.readline()
                    if not line:
                        break
                    if decode(line)["type"] in KINDS:
                        count += 1
                m.stop()
        return count

    return asyncio.run(main())


def _c_watchkeeper_stream(a: argparse.Namespace, m: Meter, lazy: bool = False) -> int:
    import watchkeeper as wk

    async def main() -> int:
        count = 0
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            await api.resource()
            m.start()
            async with api.watch(resource_version=a.rv, lazy=lazy) as stream:
                async for ev in stream:
                    if ev.type in KINDS:
                        if lazy and not ev.name:
                            raise RuntimeError(f"no name in {ev!r}")
                        count += 1
                        if count >= a.events:
                            break
            m.stop()
        return count

    return asyncio.run(main())


def _c_watchkeeper_stream_lazy(a: argparse.Namespace, m: Meter) -> int:
    return _c_watchkeeper_stream(a, m, lazy=True)


def _c_watchkeeper_watcher(a: argparse.Namespace, m: Meter, lazy: bool = False,
                           read: str = "") -> int:
    """``wk.watcher`` from ``a.rv`` (its public ``resource_version=``: no initial LIST).
    ``read`` is what the consumer touches per event: nothing, "name" or "obj"."""
    import watchkeeper as wk

    async def main() -> int:
        count = 0
        touched = 0
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            await api.resource()
            m.start()
            cfg = wk.WatchConfig(lazy_decode=lazy)
            changes = (wk.Apply, wk.Delete)  # built once, as the peers' loops test ``KINDS``
            async for ev in wk.watcher(api, cfg, resource_version=a.rv):
                if isinstance(ev, changes):
                    if read == "name":
                        touched += len(ev.name)
                    elif read == "obj":
                        touched += len(ev.obj["data"])
                    count += 1
                    if count >= a.events:
                        break
                elif isinstance(ev, wk.WatchError):
                    raise RuntimeError(f"watcher error: {ev.error}")
            m.stop()
        if read and not touched:
            raise RuntimeError("the consumer read nothing")
        return count

    return asyncio.run(main())


def _c_watchkeeper_watcher_lazy(a: argparse.Namespace, m: Meter) -> int:
    return _c_watchkeeper_watcher(a, m, lazy=True, read="name")


def _c_watchkeeper_watcher_lazy_obj(a: argparse.Namespace, m: Meter) -> int:
    return _c_watchkeeper_watcher(a, m, lazy=True, read="obj")


def _c_kubernetes(a: argparse.Namespace, m: Meter) -> int:
    from kubernetes import client, config, watch

    api_client = config.new_client_from_config(config_file=a.kubeconfig)
    v1 = client.CoreV1Api(api_client)
    w = watch.Watch()
    count = 0
    m.start()
    for ev in w.stream(v1.list_namespaced_config_map, a.namespace, resource_version=a.rv):
        if ev["type"] in KINDS:
            count += 1
            if count >= a.events:
                break
    m.stop()
    w.stop()
    return count


def _c_kubernetes_asyncio(a: argparse.Namespace, m: Meter) -> int:
    from kubernetes_asyncio import client, config, watch

    async def main() -> int:
        api_client = await config.new_client_from_config(config_file=a.kubeconfig)
        v1 = client.CoreV1Api(api_client)
        count = 0
        m.start()
        async with watch.Watch() as w:
            async for ev in w.stream(v1.list_namespaced_config_map, a.namespace,
                                     resource_version=a.rv):
                if ev["type"] in KINDS:
                    count += 1
                    if count >= a.events:
                        break
            m.stop()
        await api_client.close()
        return count

    return asyncio.run(main())


def _c_lightkube(a: argparse.Namespace, m: Meter) -> int:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    client = Client(KubeConfig.from_file(a.kubeconfig))
    count = 0
    m.start()
    for typ, _obj in client.watch(ConfigMap, namespace=a.namespace, resource_version=a.rv):
        if typ in KINDS:
            count += 1
            if count >= a.events:
                break
    m.stop()
    client.close()
    return count


def _c_lightkube_async(a: argparse.Namespace, m: Meter) -> int:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    async def main() -> int:
        client = AsyncClient(KubeConfig.from_file(a.kubeconfig))
        count = 0
        m.start()
        async for typ, _obj in client.watch(ConfigMap, namespace=a.namespace,
                                             resource_version=a.rv):
            if typ in KINDS:
                count += 1
                if count >= a.events:
                    break
        m.stop()
        await client.close()
        return count

    return asyncio.run(main())


def _c_kr8s(a: argparse.Namespace, m: Meter) -> int:
    import kr8s.asyncio

    async def main() -> int:
        api = await kr8s.asyncio.api(kubeconfig=a.kubeconfig)
        count = 0
        m.start()
        async for typ, _obj in api.watch("configmaps", namespace=a.namespace, since=a.rv):
            if typ in KINDS:
                count += 1
                if count >= a.events:
                    break
        m.stop()
        return count

    return asyncio.run(main())


def _c_kopf(a: argparse.Namespace, m: Meter) -> int:
    import logging

    import kopf
    from kopf._cogs.clients import fetching, watching

    logging.getLogger("kopf").setLevel(logging.WARNING)
    state: dict[str, Any] = {"count": 0, "handled": 0, "started": False}
    stop = asyncio.Event()

    original_fetch_objs = fetching.fetch_objs
    original_watch_objs = watching.watch_objs

    async def fetch_from_rv(**kw: Any) -> Any:
        if kw["resource"].plural != "configmaps":  # kopf's own namespace/CRD observers
            async for item in original_fetch_objs(**kw):
                yield item
            return
        yield [], a.rv  # the harness: an empty initial list at the starting version

    def timed_watch_objs(**kw: Any) -> Any:
        if not state["started"] and kw["resource"].plural == "configmaps":
            state["started"] = True
            m.start()
        return original_watch_objs(**kw)

    fetching.fetch_objs = fetch_from_rv
    watching.watch_objs = timed_watch_objs

    @kopf.on.event("v1", "configmaps")
    async def on_event(**kwargs: Any) -> None:
        state["handled"] += 1
        obj = kwargs["event"].get("object") or {}
        if (obj.get("metadata") or {}).get("resourceVersion") == a.last_rv:
            m.stop()
            stop.set()

    async def main() -> None:
        await kopf.operator(standalone=True, namespaces=[a.namespace], stop_flag=stop)

    asyncio.run(main())
    # kopf coalesces bursts per object (batch window), so its handler may run fewer times
    # than there are events; it has processed the whole stream once the last version arrives.
    EXTRA["kopf_handler_calls"] = state["handled"]
    return a.events if stop.is_set() else 0


RUNNERS: dict[str, Runner] = {
    "raw-socket": _c_raw_socket,
    "raw-socket-stock": _c_raw_socket,
    "aiohttp-readline": _c_aiohttp_readline,
    "asyncio-floor": _c_asyncio_floor,
    "watchkeeper-stream": _c_watchkeeper_stream,
    "watchkeeper-watcher": _c_watchkeeper_watcher,
    "watchkeeper-stream-lazy": _c_watchkeeper_stream_lazy,
    "watchkeeper-watcher-lazy": _c_watchkeeper_watcher_lazy,
    "watchkeeper-watcher-lazy-obj": _c_watchkeeper_watcher_lazy_obj,
    "kubernetes": _c_kubernetes,
    "kubernetes_asyncio": _c_kubernetes_asyncio,
    "lightkube": _c_lightkube,
    "lightkube-async": _c_lightkube_async,
    "kr8s": _c_kr8s,
    "kopf": _c_kopf,
}

IMPORTS: dict[str, list[str]] = {
    "raw-socket": ["yaml"],
    "raw-socket-stock": ["yaml"],
    "aiohttp-readline": ["aiohttp", "msgspec", "yaml"],
    "asyncio-floor": ["yaml"],
    "msgspec": ["msgspec"],
    "watchkeeper-stream": ["watchkeeper"],
    "watchkeeper-watcher": ["watchkeeper"],
    "watchkeeper-stream-lazy": ["watchkeeper"],
    "watchkeeper-watcher-lazy": ["watchkeeper"],
    "watchkeeper-watcher-lazy-obj": ["watchkeeper"],
    "kubernetes": ["kubernetes"],
    "kubernetes_asyncio": ["kubernetes_asyncio", "kubernetes_asyncio.client"],
    "lightkube": ["lightkube", "lightkube.resources.core_v1"],
    "lightkube-async": ["lightkube", "lightkube.resources.core_v1"],
    "kr8s": ["kr8s", "kr8s.asyncio"],
    "kopf": ["kopf"],
}


def child_main(a: argparse.Namespace) -> None:
    report = ChildReport(a.child)
    for mod in IMPORTS[a.child]:
        __import__(mod)
    report.rss_base_kb = rss_kb()
    if a.child == "msgspec":
        from benchmarks.decode_floor import decode_rates

        body = Path(a.capture).read_bytes()
        rates = decode_rates(body)
        best = rates["msgspec (dicts)"]
        report.extra = {
            "events": int(best["events"]), "wall_s": best["wall_s"], "cpu_s": best["cpu_s"],
            "events_per_s": best["events_per_s"], "decoders": rates, "body_bytes": len(body),
            "server_cpu_s": None,
        }
        report.emit()
        return
    if a.loop == "uvloop":  # every asyncio.run of the runners below makes a uvloop loop
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    m = Meter(a.server_pid)
    count = 0
    try:
        count = RUNNERS[a.child](a, m)
    except Exception as exc:  # a peer that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    if report.ok and count < a.events:
        report.ok, report.error = False, f"only {count} of {a.events} events arrived"
    report.extra = {
        "events": count,
        "wall_s": m.wall,
        "cpu_s": m.cpu,
        "events_per_s": count / m.wall if m.wall > 0 else 0.0,
        "server_cpu_s": m.server_cpu,
    }
    report.extra.update(EXTRA)
    report.emit()


# -- the parent ------------------------------------------------------------------------------


def run(events: int = 100_000, objects: int = 1_000, clients: list[str] | None = None,
        repeat: int = 3, fast_replay: bool = True) -> dict[str, Any]:
    from benchmarks._server import SimProcess

    names = clients or list(CLIENTS)
    results: list[dict[str, Any]] = []
    with SimProcess(history=events + objects + 1000) as sim:
        seeded = sim.call("seed", namespace=NAMESPACE, count=objects)
        t0 = time.perf_counter()
        mod = sim.call("modify", namespace=NAMESPACE, objects=objects, count=events)
        print(f"# watch: {objects} ConfigMaps, {events} modifications made in "
              f"{time.perf_counter() - t0:.1f} s (rv {mod['rv_before']} -> {mod['rv_after']})",
              file=sys.stderr)
        rv0, last_rv = str(mod["rv_before"]), str(mod["rv_after"])
        kc = str(sim.kubeconfig)
        with tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp:
            capture = Path(tmp) / "watch-body.jsonl"
            cm = Meter()
            cpu0 = server_cpu_seconds(sim.pid)
            body, wire = raw_watch(kc, NAMESPACE, rv0, events, keep=True, meter=cm)
            capture_server_cpu = server_cpu_seconds(sim.pid) - cpu0
            capture.write_bytes(body)
            event_bytes = len(body) / events
            print(f"# watch: captured {len(body) / 1e6:.1f} MB ({event_bytes:.0f} bytes/event, "
                  f"{wire / 1e6:.1f} MB on the wire) in {cm.wall:.2f} s", file=sys.stderr)
            del body
            if fast_replay:  # fill the simulator's cache of encoded lines, untimed
                sim.call("fast_replay", on=True)
                raw_watch(kc, NAMESPACE, rv0, events, keep=False)
            common = ["--kubeconfig", kc, "--namespace", NAMESPACE, "--rv", rv0,
                      "--last-rv", last_rv, "--events", str(events), "--capture", str(capture),
                      "--server-pid", str(sim.pid)]
            for name in names:
                sim.call("fast_replay", on=fast_replay and name != "raw-socket-stock")
                runs: list[dict[str, Any]] = []
                spent = 0.0
                while len(runs) < repeat and (not runs or spent < 30.0):
                    res = run_child("watch_throughput", ["--child", name, *common],
                                    timeout=120 + events / 250, env={"KUBECONFIG": kc},
                                    server_pid=sim.pid)
                    spent += float(res.get("child_elapsed_s") or 0.0)
                    runs.append(res)
                    if not res.get("ok"):
                        break
                best = _median_run(runs)
                best.update(client=name, label=CLIENTS[name], runs=len(runs),
                            all_events_per_s=[r.get("events_per_s") for r in runs])
                results.append(best)
                _progress(best)
    floor = next((r for r in results if r["client"] == "msgspec" and r.get("ok")), None)
    if floor:
        for r in results:
            if r.get("ok") and r["cpu_s"] > 0:
                r["cpu_x_floor"] = r["cpu_s"] / floor["cpu_s"]
                r["wall_x_floor"] = r["wall_s"] / floor["wall_s"]
    return {
        "events": events, "objects": objects, "namespace": NAMESPACE,
        "bytes_per_event": event_bytes, "wire_bytes": wire, "fast_replay": fast_replay,
        "seed_bytes_per_object": seeded.get("bytes_per_object"),
        "capture": {"wall_s": cm.wall, "events_per_s": events / cm.wall,
                    "server_cpu_s": capture_server_cpu},
        "results": results,
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("ok")]
    if not ok:
        return dict(runs[-1])
    ok.sort(key=lambda r: r["events_per_s"])
    return dict(ok[len(ok) // 2])


def _progress(r: dict[str, Any]) -> None:
    if r.get("ok"):
        print(f"# watch {r['client']:<20} {r['events_per_s']:>10,.0f} ev/s  "
              f"cpu {r['cpu_s']:.2f} s  server cpu {fmt_num(r.get('server_cpu_s'), 2)} s  "
              f"peak {r['rss_peak_kb'] / 1024:.0f} MiB  ({r['runs']} runs)", file=sys.stderr)
    else:
        print(f"# watch {r['client']:<20} FAILED: {r.get('error')}", file=sys.stderr)


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        if not r.get("ok"):
            rows.append([r["label"], "FAILED", "—", "—", "—", "—", "—", "—", "—", "—",
                         (r.get("error") or "")[:120]])
            continue
        server = r.get("server_cpu_s")
        rows.append([
            r["label"], fmt_num(r["events_per_s"]), fmt_num(r["wall_s"], 2),
            fmt_num(r["cpu_s"], 2), fmt_num(r["cpu_s"] / max(r["events"], 1) * 1e6, 1),
            fmt_num(r.get("cpu_x_floor"), 1) + ("x" if r.get("cpu_x_floor") else ""),
            fmt_num(server, 2) if r["client"] != "msgspec" else "—",
            fmt_mib(r["rss_peak_kb"]), fmt_mib(r["rss_base_kb"]),
            fmt_num(r.get("other_load"), 2), _note(r),
        ])
    return markdown_table(
        ["client", "events/s", "wall s", "client CPU s", "CPU µs/event", "CPU vs floor",
         "server CPU s", "peak RSS MiB", "RSS after import MiB", "other load", "note"],
        rows,
    )


def _note(r: dict[str, Any]) -> str:
    if r["client"] == "kopf" and "kopf_handler_calls" in r:
        return f"handler ran {r['kopf_handler_calls']:,} times"
    return ""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--objects", type=int, default=1_000, help="ConfigMaps modified round-robin")
    p.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per client (median), while a client's total stays under 30 s")
    p.add_argument("--stock-server", action="store_true",
                   help="no fast replay: the stock simulator encodes and writes each event")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    p.add_argument("--rv", help=argparse.SUPPRESS)
    p.add_argument("--last-rv", help=argparse.SUPPRESS)
    p.add_argument("--capture", help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help=argparse.SUPPRESS)  # the child's event loop (watch_cpu --loops)
    a = p.parse_args(argv)
    if a.child:
        child_main(a)
        return
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        p.error(f"unknown clients: {', '.join(sorted(unknown))}; known: {', '.join(CLIENTS)}")
    data = run(a.events, a.objects, clients, a.repeat, not a.stock_server)
    path = save_results("watch", data)
    print(table(data))
    if a.json:
        print(json.dumps(data, indent=2))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
