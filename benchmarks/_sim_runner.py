"""The simulator process of the benchmarks: an ApiServer driven over stdin/stdout.

Started by ``benchmarks._server.SimProcess`` (never by hand). It prints one JSON line when it
serves, then answers one JSON command per stdin line with one JSON line on stdout:

    {"op": "seed", "namespace": "list", "count": 10000}          create ConfigMaps
    {"op": "seed_pods", "namespace": "mem", "count": 100000}     realistic Pods (the corpus)
    {"op": "modify", "namespace": "watch", "objects": 1000, "count": 100000}
    {"op": "user", "name": "bench", "namespace": "kind", "kubeconfig": "/tmp/kc"}
    {"op": "revoke", "name": "bench"} / {"op": "grant", ...}    403 on / off
    {"op": "refuse", "count_refused": false} / {"op": "clear"}  refused connections on / off
    {"op": "requests", "user": "bench", "since": 12.5}           the request log, summarised
    {"op": "list_cache", "on": true}                             replay repeated LISTs
    {"op": "fast_replay", "on": true}                            pre-encoded watch replay
    {"op": "quit"}

Objects are written through the simulator's Python API (``ApiServer.create_object`` /
``update_object``: the registry, with uid, timestamps and managedFields), not over HTTP.

Two switches make the simulator fast enough that the clients, not the server, are measured
(both off by default: then it is the stock simulator): ``list_cache`` answers a repeated LIST
with the bytes of its first answer, ``fast_replay`` serves a watch's replayed history from
pre-encoded lines written in large pieces. The body bytes a client receives are the same
either way (fast replay only puts many events in one HTTP chunk).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections import Counter
from typing import Any

import msgspec

from benchmarks._common import PAYLOAD_BYTES, configmap_body, payload
from watchkeeper_sim import ApiServer
from watchkeeper_sim.storage.registry import present

_encode = msgspec.json.encode


def _freeze() -> None:
    """Move the seeded objects and the history out of the cyclic GC's way: with 100,000
    changes stored, every full collection in the server would walk millions of dicts."""
    gc.collect()
    gc.freeze()


class Runner:
    def __init__(self, srv: ApiServer) -> None:
        self.srv = srv
        self.rules: dict[str, list[dict[str, Any]]] = {}

    # ---- objects -------------------------------------------------------------------------

    def _ensure_namespace(self, ns: str) -> None:
        try:
            self.srv.get_object("v1", "Namespace", ns, namespace="")
        except Exception:
            self.srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}})

    def seed(self, namespace: str, count: int,
             payload_bytes: int = PAYLOAD_BYTES) -> dict[str, Any]:
        self._ensure_namespace(namespace)
        t0 = time.perf_counter()
        last: dict[str, Any] = {}
        for i in range(count):
            last = self.srv.create_object(
                configmap_body(f"cm-{i:06d}", namespace, i, payload_bytes), manager="bench-seed"
            )
        _freeze()
        item = dict(last)
        item.pop("kind", None)
        item.pop("apiVersion", None)
        return {"created": count, "seconds": time.perf_counter() - t0,
                "bytes_per_object": len(_encode(last)), "bytes_per_list_item": len(_encode(item)),
                "metadata_bytes_per_item": len(_encode(last["metadata"])),
                "rv": self.srv.store.rv, "example": last}

    def seed_pods(self, namespace: str, count: int) -> dict[str, Any]:
        """``count`` distinct Pods made from the real control plane's corpus
        (``benchmarks._pod_corpus``), stored as they are (straight into the store: the
        registry would rewrite the real server's managedFields, uids and timestamps).

        Returns the mean JSON bytes of a LIST item (no kind/apiVersion, as kube-apiserver
        sends them) and of its ``metadata`` alone, the denominators of the memory ratios."""
        from benchmarks import _pod_corpus

        self._ensure_namespace(namespace)
        rt = self.srv.resource("v1", "pods")
        store = self.srv.store
        t0 = time.perf_counter()
        item_bytes = meta_bytes = 0
        last: dict[str, Any] = {}
        for pod in _pod_corpus.synthesize(_pod_corpus.load(), count, namespace):
            pod["metadata"].pop("resourceVersion", None)
            last = store.insert(rt, pod)
            item_bytes += len(_encode(last))
            meta_bytes += len(_encode(last["metadata"]))
        _freeze()
        return {"created": count, "seconds": time.perf_counter() - t0,
                "bytes_per_list_item": round(item_bytes / max(count, 1)),
                "metadata_bytes_per_item": round(meta_bytes / max(count, 1)),
                "rv": store.rv, "example": last}

    def modify(self, namespace: str, objects: int, count: int,
               payload_bytes: int = PAYLOAD_BYTES) -> dict[str, Any]:
        """``count`` updates of the payload, round-robin over cm-000000 .. cm-<objects-1>.

        Written straight into the store (no registry, no HTTP) for speed; the managedFields
        timestamp is bumped as an Update by a real manager would."""
        store = self.srv.store
        rt = self.srv.resource("v1", "configmaps")
        rv_before = store.rv
        t0 = time.perf_counter()
        current = [store.get(rt, namespace, f"cm-{i:06d}") for i in range(objects)]
        for n in range(count):
            i = n % objects
            gen = n // objects + 1
            obj = dict(current[i])
            meta = dict(obj["metadata"])
            fields = [dict(f) for f in meta.get("managedFields") or []]
            for f in fields:
                f["time"] = self.srv.registry.now()
            meta["managedFields"] = fields
            obj["metadata"] = meta
            obj["data"] = {"payload": payload(i, gen, payload_bytes)}
            current[i] = store.replace(rt, obj)
        _freeze()
        last = present(current[(count - 1) % objects], rt)
        return {"rv_before": rv_before, "rv_after": store.rv,
                "seconds": time.perf_counter() - t0,
                "bytes_per_event": len(_encode({"type": "MODIFIED", "object": last})) + 1}

    # ---- users, RBAC, faults ---------------------------------------------------------------

    def user(self, name: str, namespace: str, kubeconfig: str,
             verbs: list[str] | None = None) -> dict[str, Any]:
        self._ensure_namespace(namespace)
        self.srv.add_user(name)
        read = verbs or ["get", "list", "watch"]
        self.rules[name] = [
            {"verbs": read, "resources": ["configmaps"], "namespaces": [namespace]},
            # what kopf's observers read (its documented RBAC); unused by the others
            {"verbs": read, "resources": ["namespaces"]},
            {"verbs": read, "resources": ["customresourcedefinitions"],
             "groups": ["apiextensions.k8s.io"]},
        ]
        self.grant(name)
        self.srv.kubeconfig(kubeconfig, user=name)
        return {"kubeconfig": kubeconfig}

    def grant(self, name: str) -> dict[str, Any]:
        for rule in self.rules.get(name, []):
            self.srv.rbac.grant(name, **rule)
        return {}

    def revoke(self, name: str) -> dict[str, Any]:
        self.srv.rbac.revoke_all(name)
        return {}

    def refuse(self, count_refused: bool = False) -> dict[str, Any]:
        self.srv.faults.refuse(count_refused=count_refused)
        return {}

    def stop_watches(self) -> dict[str, Any]:
        """End every open watch cleanly (as a server-side timeout would)."""
        self.srv.stop_all_watches()
        return {}

    def fast_replay(self, on: bool) -> dict[str, Any]:
        global _FAST_REPLAY
        _FAST_REPLAY = on
        return {}

    def list_cache(self, on: bool) -> dict[str, Any]:
        global _LIST_CACHE
        _LIST_CACHE = {} if on else None
        return {}

    def clear(self) -> dict[str, Any]:
        self.srv.faults.clear()
        return {}

    # ---- the log ---------------------------------------------------------------------------

    def requests(self, user: str | None = None, since: float | None = None,
                 until: float | None = None, detail: bool = False) -> dict[str, Any]:
        """Requests of ``user`` that arrived in [since, until) (time.monotonic() values)."""
        recs = [r for r in self.srv.requests
                if (user is None or r.user == user)
                and (since is None or r.time >= since) and (until is None or r.time < until)]
        by: Counter[str] = Counter()
        by_resource: Counter[str] = Counter()
        for r in recs:
            by[f"{r.verb or r.method} {r.status}"] += 1
            by_resource[r.path.rstrip("/").rsplit("/", 1)[-1]] += 1
        out: dict[str, Any] = {
            "count": len(recs),
            "by_verb_status": dict(by),
            "by_resource": dict(by_resource),
            "times": [round(r.time, 4) for r in recs],
            "connections": self.srv.connection_attempts,
            "now": time.monotonic(),
        }
        if detail:
            out["records"] = [
                {"t": r.time, "method": r.method, "path": r.path, "query": r.query,
                 "status": r.status, "user": r.user, "verb": r.verb} for r in recs[-200:]
            ]
        return out


_FAST_REPLAY = False


def _install_fast_replay() -> None:
    """When switched on (op ``fast_replay``), serve a watch's replayed history from a cache
    of pre-encoded lines (keyed by the stored object).

    The stock ``WatchStream._event`` rebuilds and encodes each event for every watch; with
    it, each history line is encoded once, and the replay of ``sub.initial`` is written in
    ~256 KB writes (many events per HTTP chunk; kube-apiserver and the stock simulator send a
    replay in 2,048-byte chunks, ``benchmarks._replay --framing go`` too). Faults are not
    consulted on this path: use it only for throughput runs.
    """
    from watchkeeper_sim.api import watch as _watch
    from watchkeeper_sim.storage.registry import present
    from watchkeeper_sim.wire.http import encode

    cache: dict[tuple[int, str], bytes] = {}
    blocks_of: dict[tuple[int, int, int], list[bytes]] = {}
    original_run = _watch.WatchStream.run

    def line_of(stream: Any, ev: Any) -> bytes:
        key = (id(ev.object), ev.type)
        data = cache.get(key)
        if data is None:
            data = encode({"type": ev.type, "object": present(ev.object, stream.rt)})
            cache[key] = data
        return data

    def blocks(stream: Any, initial: list[Any]) -> list[bytes]:
        """The replay as ~256 KB pieces, built once per replayed range: repeated runs of
        the benchmark then cost the server only its socket writes."""
        key = (id(initial[0].object), id(initial[-1].object), len(initial))
        out = blocks_of.get(key)
        if out is None:
            out, batch, size = [], [], 0
            for ev in initial:
                data = line_of(stream, ev)
                batch.append(data)
                size += len(data)
                if size >= 256 * 1024:
                    out.append(b"".join(batch))
                    batch, size = [], 0
            if batch:
                out.append(b"".join(batch))
            blocks_of[key] = out
        return out

    async def run(self: Any) -> Any:
        initial = self.sub.initial
        if _FAST_REPLAY and len(initial) > 1:
            await self.start()
            for block in blocks(self, initial):
                await self.resp.write(block)
            self.watch.events_sent += len(initial)
            self.sub.initial = []
        return await original_run(self)

    _watch.WatchStream.run = run  # type: ignore[method-assign]


_LIST_CACHE: dict[str, tuple[int, bytes]] | None = None


def _install_list_cache() -> None:
    """When switched on (op ``list_cache``), answer a repeated LIST (same user, path and
    query) with the bytes of its first answer, so the list benchmark measures clients, not
    the simulator's per-object copies. Off by default; any write should turn it off."""
    from aiohttp import web

    from watchkeeper_sim.api.handlers import Handlers
    from watchkeeper_sim.wire.http import BASE_HEADERS

    original = Handlers._collection

    async def collection(self: Any, request: Any, rt: Any, ns: Any, watch: bool,
                         route: Any) -> Any:
        if watch or _LIST_CACHE is None:
            return await original(self, request, rt, ns, watch, route)
        key = f"{request.get('wk_user')} {request.path_qs}"
        hit = _LIST_CACHE.get(key)
        if hit is None:
            resp = await original(self, request, rt, ns, watch, route)
            body = getattr(resp, "body", None)
            if resp.status != 200 or not isinstance(body, bytes):
                return resp
            hit = _LIST_CACHE[key] = (resp.status, body)
        return web.Response(body=hit[1], status=hit[0], content_type="application/json",
                            headers=BASE_HEADERS)

    Handlers._collection = collection  # type: ignore[method-assign]


async def serve(args: argparse.Namespace) -> None:
    global _FAST_REPLAY
    _FAST_REPLAY = args.fast_replay
    _install_fast_replay()
    _install_list_cache()
    srv = ApiServer(
        port=args.port,
        history_size=args.history,
        history_age=1e9,
        bookmark_interval=3600.0,
    )
    runner = Runner(srv)
    await srv.start()
    if args.kubeconfig:
        srv.kubeconfig(args.kubeconfig)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "url": srv.url, "port": srv.port, "pid": os.getpid(),
                          "token": srv.token("admin")}) + "\n")
    out.flush()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            cmd = json.loads(line)
            op = cmd.pop("op")
            if op == "quit":
                break
            try:
                if op == "ping":
                    result: dict[str, Any] = {"now": time.monotonic()}
                else:
                    result = getattr(runner, op)(**cmd)
                    await asyncio.sleep(0)
                reply = {"ok": True, **result}
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(reply) + "\n")
            out.flush()
    finally:
        await srv.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--kubeconfig")
    p.add_argument("--history", type=int, default=10_000)
    p.add_argument("--fast-replay", action="store_true")
    args = p.parse_args()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
