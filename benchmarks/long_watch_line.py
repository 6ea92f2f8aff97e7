"""Client CPU to receive one very long watch event (issue 10 item 9: linear buffering).

A raw server in a child process sends one ADDED event of ``--mb`` megabytes in 64 KiB HTTP
chunks; this process reads it through ``Api.watch`` and reports its own CPU seconds, the
wall time, the longest event-loop stall (a 10 ms ticker) and peak RSS. Runs against any
checkout (``PYTHONPATH=src``); where the client has a line cap it is raised above the size.

    PYTHONPATH=src python -m benchmarks.long_watch_line [--mb 100]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import resource
import subprocess
import sys
import time

SERVER = r'''
import asyncio, sys
SIZE = int(sys.argv[1])
async def serve(r, w):
    await r.readuntil(b"\r\n\r\n")
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    head = (b'{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":'
            b'{"name":"big","namespace":"default","resourceVersion":"2"},"data":{"k":"')
    tail = b'"}}}\n'
    body = head + b"x" * (SIZE - len(head) - len(tail)) + tail
    for i in range(0, len(body), 65536):
        piece = body[i:i + 65536]
        w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await w.drain()
    w.write(b"0\r\n\r\n")
    await w.drain()
    w.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
'''


async def run(size: int, port: int) -> str:
    import watchkeeper as wk

    kw = {}
    if "max_event_bytes" in inspect.signature(wk.Client).parameters:
        kw["max_event_bytes"] = 2 * size
    config = wk.ClientConfig(server=f"http://127.0.0.1:{port}")
    async with wk.Client(config, **kw) as client:
        api = client.api("configmaps", namespace="default")
        loop = asyncio.get_running_loop()
        worst, stop = 0.0, False

        async def ticker() -> None:
            nonlocal worst
            while not stop:
                t = loop.time()
                await asyncio.sleep(0.01)
                worst = max(worst, loop.time() - t - 0.01)

        tick = asyncio.ensure_future(ticker())
        cpu, wall = time.process_time(), time.perf_counter()
        async with api.watch(resource_version="1", read_timeout=600) as events:
            async for ev in events:
                assert len(ev.object["data"]["k"]) > size - 300
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        stop = True
        await tick
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (f"{size / 1e6:.0f} MB line: client CPU {cpu:.2f} s, wall {wall:.2f} s, "
            f"longest loop stall {worst * 1000:.0f} ms, peak RSS {rss:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=100, help="size of the event line in MB")
    size = p.parse_args().mb * 1_000_000
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(size)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        print(asyncio.run(run(size, int(proc.stdout.readline()))))
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
