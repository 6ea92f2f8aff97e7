"""Where the time of one watch event goes on the aiohttp path the watch stream used before
issue 11 (``client/stream.py`` replaced it; this keeps the figures in docs/benchmarks.md
reproducible): the same replay read with more and more of the steps (read chunks, split
lines, decode the head, decode everything), through the client's aiohttp session.

    python -m benchmarks.watch_breakdown [--events 100000]

Client CPU µs per event for each step, in one process against the benchmark simulator with
fast replay (see docs/benchmarks.md). Differences between rows are the cost of a step.
"""

from __future__ import annotations

import argparse
import asyncio
import time

STEPS = ("read chunks", "+ split lines", "+ head decode (lazy stream)",
         "+ full decode (eager stream)")


async def _measure(kc: str, namespace: str, rv: str, events: int, step: int) -> float:
    import msgspec

    import watchkeeper as wk
    from watchkeeper.client.api import _decode_any, _Head

    decode_head = msgspec.json.Decoder(_Head).decode

    async with wk.Client(wk.ClientConfig.from_kubeconfig(kc)) as client:
        api = client.api("configmaps", namespace=namespace)
        path = await api._path()
        params = {"watch": "true", "resourceVersion": rv}
        count = 0
        started = time.process_time()
        transport = client.transport
        session = await transport._get_session()
        headers = await transport._headers("application/json", "GET", path)
        async with session.get(transport._base + path, params=params, headers=headers,
                               **transport._kwargs()) as resp:
            reader = resp.content
            buf = b""
            while count < events:
                chunk: bytes = await reader.readany()
                if not chunk:
                    break
                if step == 0:
                    count += chunk.count(b"\n")
                    continue
                lines = (buf + chunk).split(b"\n")
                buf = lines.pop()
                count += len(lines)
                if step == 2:
                    for line in lines:
                        decode_head(line)
                elif step == 3:
                    for line in lines:
                        _decode_any(line)
        return (time.process_time() - started) / max(count, 1) * 1e6


def main(argv: list[str] | None = None) -> None:
    from benchmarks._server import SimProcess
    from benchmarks.watch_throughput import NAMESPACE, raw_watch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=100_000)
    a = p.parse_args(argv)
    with SimProcess(history=a.events + 2000) as sim:
        sim.call("seed", namespace=NAMESPACE, count=1000)
        mod = sim.call("modify", namespace=NAMESPACE, objects=1000, count=a.events)
        rv, kc = str(mod["rv_before"]), str(sim.kubeconfig)
        sim.call("fast_replay", on=True)
        raw_watch(kc, NAMESPACE, rv, a.events, keep=False)  # fill the replay cache
        print("| step | client CPU µs/event (best of 3) |\n|---|--:|")
        for step, label in enumerate(STEPS):
            best = min(asyncio.run(_measure(kc, NAMESPACE, rv, a.events, step))
                       for _ in range(3))
            print(f"| {label} | {best:.2f} |")


if __name__ == "__main__":
    main()
