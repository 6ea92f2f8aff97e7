"""The simulator's write rate: label PATCHes while watches are open, as a sharder makes them.

The simulator (its own process, so its CPU is not the client's) is seeded with ``--objects``
ConfigMaps of ~1.1 KB; the client opens three label-selector watches and one metadata-only
watch (three replicas and a sharder), then sends one conditional merge patch per object
(a shard label and the resourceVersion), ``--concurrency`` at a time. Rounds alternate the
simulator's document copy: ``storage.clone`` (what it uses) and ``copy.deepcopy`` (what it
used before 2026-12-05), so both are measured in one run on the same machine.

    PYTHONPATH=src:sim .venv/bin/python -m benchmarks.sim_writes --objects 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import PYTHON, ROOT, configmap_body, markdown_table, save_results

NAMESPACE = "writes"


async def _serve(objects: int, copier: str, kubeconfig: str) -> None:
    """The child: a seeded simulator until stdin closes."""
    from watchkeeper_sim import ApiServer
    from watchkeeper_sim.storage import fields, namespaces, patch, registry, store

    if copier == "deepcopy":
        for module in (fields, namespaces, patch, registry, store):
            module.clone = copy.deepcopy  # type: ignore[attr-defined]
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": NAMESPACE}})
        for i in range(objects):
            srv.create_object(configmap_body(f"cm-{i:06d}", NAMESPACE, i), manager="seed")
        srv.kubeconfig(kubeconfig)
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


async def _round(a: argparse.Namespace, copier: str, kubeconfig: str) -> dict[str, Any]:
    import watchkeeper as wk

    proc = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "benchmarks.sim_writes", "--child", copier, "--objects", str(a.objects),
        "--kubeconfig", kubeconfig, cwd=ROOT, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    hello = json.loads(await proc.stdout.readline())
    assert hello.get("ready"), hello
    watches: list[asyncio.Task[None]] = []
    try:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(kubeconfig)) as client:
            api = client.api("configmaps", namespace=NAMESPACE)

            async def follow(config: wk.WatchConfig) -> None:
                async for _ in wk.watcher(api, config):
                    pass

            watches = [asyncio.create_task(follow(wk.WatchConfig(label_selector=f"s=r{i}")))
                       for i in range(3)]
            watches.append(asyncio.create_task(follow(wk.WatchConfig(metadata_only=True))))
            items = (await api.list_all()).items
            pending = iter(enumerate(items))
            cpu0, t0 = _cpu(proc.pid), time.perf_counter()

            async def writer() -> None:
                for i, obj in pending:
                    md = obj["metadata"]
                    await api.patch(md["name"], {"metadata": {
                        "resourceVersion": md["resourceVersion"], "labels": {"s": f"r{i % 3}"}}})

            await asyncio.gather(*(writer() for _ in range(a.concurrency)))
            wall, cpu = time.perf_counter() - t0, _cpu(proc.pid) - cpu0
    finally:
        for t in watches:
            t.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(proc.wait(), 30)
    return {"copier": copier, "patches": len(items), "wall_s": round(wall, 3),
            "patches_per_s": round(len(items) / wall), "sim_cpu_us_per_patch":
            round(cpu / len(items) * 1e6, 1)}


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _main(a: argparse.Namespace) -> int:
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wk-writes-") as tmp:
        for r in range(a.rounds):
            order = ["clone", "deepcopy"] if r % 2 == 0 else ["deepcopy", "clone"]
            for copier in order:
                res = await _round(a, copier, str(Path(tmp) / f"{copier}-{r}.kubeconfig"))
                res["round"] = r
                print(f"# round {r} {copier:9s} {res['patches_per_s']:,}/s, simulator "
                      f"{res['sim_cpu_us_per_patch']} µs CPU per patch", file=sys.stderr)
                runs.append(res)
    rows = []
    for copier in ("clone", "deepcopy"):
        mine = [x for x in runs if x["copier"] == copier]
        rows.append([copier, f"{statistics.median(x['patches_per_s'] for x in mine):,.0f}",
                     f"{statistics.median(x['sim_cpu_us_per_patch'] for x in mine):.0f}",
                     len(mine)])
    print(markdown_table(["simulator copies with", "PATCHes/s (median)",
                          "simulator CPU µs per PATCH (median)", "rounds"], rows))
    path = save_results("sim-writes", {"args": vars(a), "runs": runs})
    print(f"\nresults: {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--child", choices=["clone", "deepcopy"], help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        asyncio.run(_serve(a.objects, a.child, a.kubeconfig))
        return 0
    return asyncio.run(_main(a))


if __name__ == "__main__":
    raise SystemExit(main())
