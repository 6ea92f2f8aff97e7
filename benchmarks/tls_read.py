"""Client CPU of only receiving a watch body, plain and over TLS, by three reading paths.

Why: over TLS our lazy watcher costs ~0.6 µs more per event than over plain HTTP
(benchmarks/watch_cpu.py). This measures how much of that any Python reader pays: the
captured body is served by ``benchmarks._replay`` (TLS 1.3 with Go's suite order, as a
kube-apiserver negotiates) and read to the end, decoding nothing, by

- ``asyncio``: an ``asyncio.BufferedProtocol`` (our watch reader's transport path; over TLS,
  asyncio's SSL protocol: socket, its buffer, a MemoryBIO, decrypted into ours);
- ``nonblocking SSLSocket``: ``ssl.SSLSocket.recv_into`` on a non-blocking socket from an
  event-loop reader callback (OpenSSL reads the socket itself: no MemoryBIO);
- ``blocking socket``: a plain ``recv_into`` loop, no event loop (the floor).

Each round runs every path once, in one process, order rotated; medians of process CPU per
event (body bytes / ``--bytes-per-event``, 1,176 for the captured ConfigMaps).

    python -m benchmarks.tls_read --body FILE [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, markdown_table, save_results
from benchmarks.watch_cpu import Replay

REQUEST = b"GET /api/v1/namespaces/watch/configmaps?watch=true HTTP/1.1\r\nHost: replay\r\n\r\n"
BUFFER = 2 << 20


class _Server:
    """A replay server (``watch_cpu.Replay``, 2,048-byte chunks) and the TLS context that
    trusts it (None for plain HTTP)."""

    def __init__(self, body: Path, tls: bool, tmp: Path) -> None:
        import yaml

        self.replay = Replay(body, tls, tmp, "go")
        self.port = self.replay.port
        cluster = yaml.safe_load(self.replay.kubeconfig.read_text())["clusters"][0]["cluster"]
        ca = cluster.get("certificate-authority-data")
        self.ctx = ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None

    def stop(self) -> None:
        self.replay.stop()


class _Counter(asyncio.BufferedProtocol):
    def __init__(self, total: int, done: asyncio.Future[None]) -> None:
        self.mv = memoryview(bytearray(BUFFER))
        self.total, self.done, self.n = total, done, 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.mv

    def buffer_updated(self, nbytes: int) -> None:
        self.n += nbytes
        if self.n >= self.total and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _asyncio(server: _Server, total: int) -> tuple[float, int]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    proto = _Counter(total, done)
    transport, _ = await loop.create_connection(
        lambda: proto, "127.0.0.1", server.port, ssl=server.ctx,
        server_hostname="127.0.0.1" if server.ctx else None)
    t0 = time.process_time()
    transport.write(REQUEST)
    await done
    cpu = time.process_time() - t0
    transport.close()
    return cpu, proto.n


async def _nonblocking_sslsocket(server: _Server, total: int) -> tuple[float, int]:
    assert server.ctx is not None
    loop = asyncio.get_running_loop()
    sock = server.ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                                  server_hostname="127.0.0.1")
    sock.setblocking(False)
    mv = memoryview(bytearray(BUFFER))
    got = 0
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        nonlocal got
        eof = False
        try:
            while True:  # drain what OpenSSL holds too: the socket will not wake us for it
                k = sock.recv_into(mv)
                if not k:
                    eof = True
                    break
                got += k
        except ssl.SSLWantReadError:
            pass
        if (got >= total or eof) and not done.done():
            done.set_result(None)

    t0 = time.process_time()
    sock.sendall(REQUEST)
    loop.add_reader(sock.fileno(), readable)
    await done
    cpu = time.process_time() - t0
    loop.remove_reader(sock.fileno())
    sock.close()
    return cpu, got


def _blocking(server: _Server, total: int) -> tuple[float, int]:
    raw = socket.create_connection(("127.0.0.1", server.port))
    sock = server.ctx.wrap_socket(raw, server_hostname="127.0.0.1") if server.ctx else raw
    mv = memoryview(bytearray(BUFFER))
    got = 0
    t0 = time.process_time()
    sock.sendall(REQUEST)
    while got < total:
        k = sock.recv_into(mv)
        if not k:
            break
        got += k
    cpu = time.process_time() - t0
    sock.close()
    return cpu, got


def run(body: Path, rounds: int, bytes_per_event: float) -> dict[str, Any]:
    total = body.stat().st_size
    events = total / bytes_per_event
    with tempfile.TemporaryDirectory(prefix="wk-tls-read-") as tmp_s:
        plain, tls = _Server(body, False, Path(tmp_s)), _Server(body, True, Path(tmp_s))
        paths: dict[str, Callable[[], tuple[float, int]]] = {
            "asyncio, plain": lambda: asyncio.run(_asyncio(plain, total)),
            "asyncio, TLS": lambda: asyncio.run(_asyncio(tls, total)),
            "nonblocking SSLSocket, TLS": lambda: asyncio.run(_nonblocking_sslsocket(tls, total)),
            "blocking socket, plain": lambda: _blocking(plain, total),
            "blocking socket, TLS": lambda: _blocking(tls, total),
        }
        names = list(paths)
        runs: dict[str, list[float]] = {n: [] for n in names}
        loads = []
        try:
            for rnd in range(rounds):
                loads.append(list(os.getloadavg()))
                for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                    cpu, got = paths[name]()
                    if got < total:  # the body must arrive whole, or the number means nothing
                        raise RuntimeError(f"{name}: {got:,} of {total:,} bytes")
                    runs[name].append(cpu / events * 1e6)
                    print(f"# round {rnd} {name:<28} {runs[name][-1]:.3f} µs/event",
                          file=sys.stderr)
        finally:
            plain.stop()
            tls.stop()
    return {"body_bytes": total, "bytes_per_event": bytes_per_event, "rounds": rounds,
            "framing": "go", "tls_suites": "go", "loadavg_per_round": loads,
            "results": [{"path": n, "cpu_us_per_event_median": statistics.median(v),
                         "min": min(v), "max": max(v), "runs": v} for n, v in runs.items()]}


def table(data: dict[str, Any]) -> str:
    rows = [[r["path"], f"{r['cpu_us_per_event_median']:.3f}",
             f"{r['min']:.3f}-{r['max']:.3f}"] for r in data["results"]]
    return markdown_table(["reading path", "CPU µs/event (median)", "range"], rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--body", type=Path, required=True,
                   help="a captured watch body (benchmarks.watch_cpu --body keeps one)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--bytes-per-event", type=float, default=1176.0)
    a = p.parse_args(argv)
    data = run(a.body, a.rounds, a.bytes_per_event)
    path = save_results("tls-read", data)
    print(table(data))
    print(f"\nresults: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
