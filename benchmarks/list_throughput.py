"""LIST throughput: objects/s for 10,000 ConfigMaps, each client in its own process.

Every client lists the same namespace of the same simulator, the way its users would:
paginated (limit 500 + continue, or the library's own pager) and in one unpaginated request,
into what the library normally returns (dicts for us, models for the generated clients).
After one warm-up list, ``--runs`` timed lists; reported: the median objects/s, the median
client CPU seconds per list, the peak RSS of the client process, and the server's CPU
seconds per list (read from /proc, so the reader can see when the server is the bound).

    python -m benchmarks.list_throughput [--objects 10000] [--runs 5] [--clients a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks._common import (
    ChildReport,
    Meter,
    fmt_mib,
    fmt_num,
    markdown_table,
    median,
    rss_kb,
    run_child,
    save_results,
)

NAMESPACE = "list"
PAGE = 500

# (client, variant) pairs; variant "paged" = limit 500 + continue, "full" = one request.
CLIENTS: dict[str, tuple[str, ...]] = {
    "raw-http-stock": ("paged", "full"),
    "raw-http": ("paged", "full"),
    "watchkeeper": ("paged", "full"),
    "kubernetes": ("paged", "full"),
    "kubernetes_asyncio": ("paged", "full"),
    "lightkube": ("paged", "full"),
    "lightkube-async": ("paged", "full"),
    "kr8s": ("paged",),
}

LABELS = {
    "raw-http-stock": "stock simulator: raw HTTP, no decode, no cache",
    "raw-http": "floor: raw HTTP, no decode",
    "watchkeeper": "watchkeeper (dicts)",
    "kubernetes": "kubernetes (official, models)",
    "kubernetes_asyncio": "kubernetes_asyncio (models)",
    "lightkube": "lightkube sync (models)",
    "lightkube-async": "lightkube async (models)",
    "kr8s": "kr8s async (APIObjects, its pager: limit 100)",
}

SyncRun = Callable[[], int]
AsyncRun = Callable[[], Awaitable[int]]


# -- the clients (each function runs inside its own child process) ---------------------------


async def _watchkeeper(kc: str, ns: str, paged: bool) -> tuple[AsyncRun, Callable[[], Any]]:
    import watchkeeper as wk

    client = wk.Client(wk.ClientConfig.from_kubeconfig(kc))
    api = client.api("configmaps", namespace=ns)

    async def run() -> int:
        if paged:
            return len((await api.list_all(page_size=PAGE)).items)
        return len((await api.list()).items)

    return run, client.close


def _kubernetes(kc: str, ns: str, paged: bool) -> tuple[SyncRun, Callable[[], Any]]:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kc)
    v1 = client.CoreV1Api(api_client)

    def run() -> int:
        if not paged:
            return len(v1.list_namespaced_config_map(ns).items)
        items: list[Any] = []
        token = None
        while True:
            kw: dict[str, Any] = {"_continue": token} if token else {}
            resp = v1.list_namespaced_config_map(ns, limit=PAGE, **kw)
            items.extend(resp.items)
            token = resp.metadata._continue if resp.metadata else None
            if not token:
                return len(items)

    return run, api_client.close


async def _kubernetes_asyncio(kc: str, ns: str, paged: bool) -> tuple[AsyncRun, Callable[[], Any]]:
    from kubernetes_asyncio import client, config

    api_client = await config.new_client_from_config(config_file=kc)
    v1 = client.CoreV1Api(api_client)

    async def run() -> int:
        if not paged:
            return len((await v1.list_namespaced_config_map(ns)).items)
        items: list[Any] = []
        token = None
        while True:
            kw: dict[str, Any] = {"_continue": token} if token else {}
            resp = await v1.list_namespaced_config_map(ns, limit=PAGE, **kw)
            items.extend(resp.items)
            token = resp.metadata._continue if resp.metadata else None
            if not token:
                return len(items)

    return run, api_client.close


def _lightkube(kc: str, ns: str, paged: bool) -> tuple[SyncRun, Callable[[], Any]]:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    client = Client(KubeConfig.from_file(kc))

    def run() -> int:
        return len(list(client.list(ConfigMap, namespace=ns, chunk_size=PAGE if paged else None)))

    return run, client.close


async def _lightkube_async(kc: str, ns: str, paged: bool) -> tuple[AsyncRun, Callable[[], Any]]:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    client = AsyncClient(KubeConfig.from_file(kc))

    async def run() -> int:
        chunk = PAGE if paged else None
        return len([o async for o in client.list(ConfigMap, namespace=ns, chunk_size=chunk)])

    return run, client.close


async def _kr8s(kc: str, ns: str, paged: bool) -> tuple[AsyncRun, Callable[[], Any]]:
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=kc)

    async def run() -> int:
        # kr8s pages by itself with limit=100 and offers no way to change it.
        return len([o async for o in api.get("configmaps", namespace=ns)])

    return run, lambda: None


def _raw_http(kc: str, ns: str, paged: bool) -> tuple[SyncRun, Callable[[], Any]]:
    """The floor: HTTP/1.1 on a plain socket, body read whole, nothing decoded but the
    continue token (found with a byte search)."""
    host, port, token = _server_of(kc)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    path = f"/api/v1/namespaces/{ns}/configmaps"

    def get(query: str) -> bytes:
        req = (
            f"GET {path}?{query} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
        sock.sendall(req)
        return _read_response(sock)

    def run() -> int:
        count = 0
        query = f"limit={PAGE}" if paged else ""
        while True:
            body = get(query)
            count += body.count(b'"uid":')  # one per object
            cont = _continue_of(body)
            if not paged or not cont:
                return count
            query = f"limit={PAGE}&continue={cont}"

    return run, sock.close


def _server_of(kc: str) -> tuple[str, int, str]:
    import yaml

    with open(kc) as f:
        doc = yaml.safe_load(f)
    ctx_name = doc.get("current-context")
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
    server: str = cluster["server"]
    if not server.startswith("http://"):
        raise SystemExit(f"raw-http needs a plain-http simulator, got {server}")
    hostport = server[len("http://"):].rstrip("/")
    host, _, port = hostport.rpartition(":")
    return host, int(port), str(user.get("token", ""))


def _continue_of(body: bytes) -> str | None:
    i = body.find(b'"continue":"')
    if i < 0:
        return None
    j = body.index(b'"', i + 12)
    return body[i + 12 : j].decode() or None


def _read_response(sock: socket.socket) -> bytes:
    """One HTTP/1.1 response body (Content-Length or chunked), read into memory."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed")
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    headers = head.decode("latin-1").lower()
    if "content-length:" in headers:
        n = int(headers.split("content-length:", 1)[1].split("\r\n", 1)[0])
        body = bytearray(rest)
        while len(body) < n:
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed")
            body += data
        return bytes(body[:n])
    # chunked
    body = bytearray()
    pending = bytearray(rest)
    while True:
        while b"\r\n" not in pending:
            pending += sock.recv(1 << 20)
        line, _, after = bytes(pending).partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        pending = bytearray(after)
        while len(pending) < size + 2:
            pending += sock.recv(1 << 20)
        body += pending[:size]
        pending = pending[size + 2 :]
        if size == 0:
            return bytes(body)


SYNC_CLIENTS: dict[str, Callable[[str, str, bool], tuple[SyncRun, Callable[[], Any]]]] = {
    "kubernetes": _kubernetes,
    "lightkube": _lightkube,
    "raw-http": _raw_http,
    "raw-http-stock": _raw_http,
}
ASYNC_CLIENTS: dict[
    str, Callable[[str, str, bool], Awaitable[tuple[AsyncRun, Callable[[], Any]]]]
] = {
    "watchkeeper": _watchkeeper,
    "kubernetes_asyncio": _kubernetes_asyncio,
    "lightkube-async": _lightkube_async,
    "kr8s": _kr8s,
}


def _import_only(client: str) -> None:
    """Import the library before the baseline RSS is taken, so it is not counted as work."""
    mods = {
        "watchkeeper": ["watchkeeper"],
        "kubernetes": ["kubernetes"],
        "kubernetes_asyncio": ["kubernetes_asyncio", "kubernetes_asyncio.client"],
        "lightkube": ["lightkube", "lightkube.resources.core_v1"],
        "lightkube-async": ["lightkube", "lightkube.resources.core_v1"],
        "kr8s": ["kr8s", "kr8s.asyncio"],
        "raw-http": [],
        "raw-http-stock": [],
    }[client]
    for m in mods:
        __import__(m)


def child_main(args: argparse.Namespace) -> None:
    client, paged = args.child, args.variant == "paged"
    report = ChildReport(client)
    _import_only(client)
    report.rss_base_kb = rss_kb()
    walls: list[float] = []
    cpus: list[float] = []
    servers: list[float] = []
    counts: list[int] = []
    try:
        if client in SYNC_CLIENTS:
            run, close = SYNC_CLIENTS[client](args.kubeconfig, args.namespace, paged)
            run()  # warm-up
            for _ in range(args.runs):
                m = Meter(args.server_pid).start()
                counts.append(run())
                m.stop()
                walls.append(m.wall)
                cpus.append(m.cpu)
                servers.append(m.server_cpu)
            close()
        else:
            async def main() -> None:
                run, close = await ASYNC_CLIENTS[client](args.kubeconfig, args.namespace, paged)
                await run()  # warm-up
                for _ in range(args.runs):
                    m = Meter(args.server_pid).start()
                    counts.append(await run())
                    m.stop()
                    walls.append(m.wall)
                    cpus.append(m.cpu)
                    servers.append(m.server_cpu)
                res = close()
                if asyncio.iscoroutine(res):
                    await res

            asyncio.run(main())
    except Exception as exc:  # a peer that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    if counts and any(c != args.objects for c in counts):
        report.ok = False
        report.error = f"listed {counts} objects, expected {args.objects}"
    rates = [c / w for c, w in zip(counts, walls, strict=True) if w > 0]
    report.extra = {
        "variant": args.variant,
        "runs": len(walls),
        "objects": counts[0] if counts else 0,
        "walls": walls,
        "cpus": cpus,
        "objects_per_s": median(rates),
        "wall_s": median(walls),
        "cpu_s": median(cpus),
        "server_cpu_s": median(servers),
    }
    report.emit()


# -- the parent ------------------------------------------------------------------------------


def run(objects: int = 10_000, runs: int = 5, clients: list[str] | None = None,
        timeout: float = 900.0) -> dict[str, Any]:
    from benchmarks._server import SimProcess

    names = clients or list(CLIENTS)
    results: list[dict[str, Any]] = []
    with SimProcess() as sim:
        info = sim.call("seed", namespace=NAMESPACE, count=objects)
        print(f"# list: seeded {objects} ConfigMaps, {info['bytes_per_object']:.0f} bytes each "
              f"as JSON", file=sys.stderr)
        for name in names:
            # Every other client gets repeated LISTs answered from the simulator's cache.
            sim.call("list_cache", on=name != "raw-http-stock")
            for variant in CLIENTS[name]:
                t0 = time.perf_counter()
                res = run_child(
                    "list_throughput",
                    ["--child", name, "--variant", variant, "--kubeconfig", str(sim.kubeconfig),
                     "--namespace", NAMESPACE, "--objects", str(objects), "--runs", str(runs),
                     "--server-pid", str(sim.pid)],
                    timeout=timeout, server_pid=sim.pid,
                )
                res.setdefault("client", name)
                res["variant"] = variant
                res["label"] = LABELS[name]
                res["elapsed_s"] = time.perf_counter() - t0
                results.append(res)
                _progress(res)
        object_bytes = info["bytes_per_object"]
    return {"objects": objects, "runs": runs, "page_size": PAGE, "namespace": NAMESPACE,
            "bytes_per_object": object_bytes, "results": results}


def _progress(res: dict[str, Any]) -> None:
    if res.get("ok"):
        print(f"# list {res['client']:<20} {res['variant']:<6} "
              f"{res['objects_per_s']:>10,.0f} obj/s  cpu {res['cpu_s']:.3f} s  "
              f"peak {res['rss_peak_kb'] / 1024:.0f} MiB", file=sys.stderr)
    else:
        print(f"# list {res['client']:<20} {res['variant']:<6} FAILED: {res.get('error')}",
              file=sys.stderr)


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        variant = "limit 500 + continue" if r["variant"] == "paged" else "one request"
        if r["client"] == "kr8s":
            variant = "limit 100 + continue"
        if not r.get("ok"):
            rows.append([r["label"], variant, "FAILED", "—", "—", "—", "—", "—",
                         (r.get("error") or "")[:120]])
            continue
        rows.append([
            r["label"], variant, fmt_num(r["objects_per_s"]), fmt_num(r["wall_s"] * 1000),
            fmt_num(r["cpu_s"], 3), fmt_num(r.get("server_cpu_s"), 3),
            fmt_mib(r["rss_peak_kb"]), fmt_mib(r["rss_base_kb"]),
            fmt_num(r.get("other_load"), 2),
        ])
    return markdown_table(
        ["client", "pages", "objects/s (median)", "wall ms", "client CPU s", "server CPU s",
         "peak RSS MiB", "RSS after import MiB", "other load"],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset")
    p.add_argument("--json", action="store_true", help="print the results as JSON too")
    # child mode
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="paged", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        p.error(f"unknown clients: {', '.join(sorted(unknown))}; known: {', '.join(CLIENTS)}")
    data = run(args.objects, args.runs, clients)
    path = save_results("list", data)
    print(table(data))
    if args.json:
        print(json.dumps(data, indent=2))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
