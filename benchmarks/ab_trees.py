"""Two source trees of watchkeeper, side by side in one run: did a change cost speed?

Runs the watch and LIST benchmarks (the watchkeeper rows, plus lightkube sync as a yardstick)
once per round for each tree, alternating which tree goes first, with ``PYTHONPATH`` pointing
at that tree's ``src``. The figure is client CPU per event (per object for LIST); the verdict
is the median over rounds of the same-round ratio ``new / base`` (1.00 = unchanged; below 1
the new tree is cheaper), so load that shifts between rounds cancels out. The load average
is recorded with each round. ``--controller N`` adds the controller benchmark
(``controller_throughput --clients watchkeeper``: client CPU per object reconciled once,
with N ConfigMaps, and its objects reconciled per second as a row of its own);
``--only-controller`` runs that one alone.

    python -m benchmarks.ab_trees --base ../base/src --new src [--rounds 5] [--controller 10000]
    python -m benchmarks.ab_trees --base ../base/src --new src --controller 10000 --only-controller
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import machine, median, save_results

WATCH_CLIENTS = "watchkeeper-watcher,watchkeeper-watcher-lazy,watchkeeper-stream,lightkube"
LIST_CLIENTS = "watchkeeper,lightkube"


def _run(module: str, args: list[str], src: Path) -> dict[str, Any]:
    """One benchmark invocation against ``src``; its results JSON (the file it saved)."""
    # the simulator (a distribution of its own) comes from this checkout for both trees
    sim = Path(__file__).resolve().parents[1] / "sim"
    path = os.pathsep.join([str(src.resolve()), str(sim)])
    env = {**os.environ, "PYTHONPATH": path, "WK_BENCH_QUIET_WAIT": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], env=env, capture_output=True, text=True,
        timeout=900, check=False,
    )
    found = re.search(r"^results: (.+)$", proc.stderr, re.M)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{module} failed for {src} (exit {proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    path = Path(found.group(1))
    data: dict[str, Any] = json.loads(path.read_text())
    path.unlink()  # a round's raw file; the combined results are saved at the end
    return data


def _per_unit(data: dict[str, Any], unit_key: str) -> dict[str, float]:
    """Client label -> client CPU microseconds per event (watch) or per object (LIST)."""
    out: dict[str, float] = {}
    for r in data["results"]:
        if not r.get("ok", True):
            continue
        label = r["client"] + (f"/{r['variant']}" if r.get("variant") else "")
        units = r.get(unit_key) or data.get(unit_key)
        out[label] = r["cpu_s"] / units * 1e6
        if unit_key == "objects" and "per_s" in r and "handler_calls" in r:  # the controller
            out[f"{label} objects/s (not µs)"] = r["per_s"]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--base", type=Path, required=True, help="the old tree's src folder")
    p.add_argument("--new", type=Path, required=True, help="the new tree's src folder")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--objects", type=int, default=10_000, help="ConfigMaps for the LIST")
    p.add_argument("--controller", type=int, default=0, metavar="N",
                   help="also the controller benchmark with N ConfigMaps (0: not run)")
    p.add_argument("--only-controller", action="store_true",
                   help="with --controller: no watch and LIST benchmarks")
    a = p.parse_args(argv)
    if a.only_controller and not a.controller:
        p.error("--only-controller needs --controller N")
    kinds: tuple[str, ...] = ("watch", "list")
    if a.controller:
        kinds = ("controller",) if a.only_controller else (*kinds, "controller")
    trees = {"base": a.base, "new": a.new}
    rounds: list[dict[str, Any]] = []
    for i in range(a.rounds):
        order = ["base", "new"] if i % 2 == 0 else ["new", "base"]
        row: dict[str, Any] = {"order": order, "load": os.getloadavg()[0]}
        for name in order:
            row[name] = {}
            if "watch" in kinds:
                watch = _run("benchmarks.watch_throughput",
                             ["--clients", WATCH_CLIENTS, "--repeat", "1",
                              "--events", str(a.events)], trees[name])
                listed = _run("benchmarks.list_throughput",
                              ["--clients", LIST_CLIENTS, "--runs", "3",
                               "--objects", str(a.objects)], trees[name])
                row[name].update(watch=_per_unit(watch, "events"),
                                 list=_per_unit(listed, "objects"))
            if a.controller:
                ctrl = _run("benchmarks.controller_throughput",
                            ["--clients", "watchkeeper", "--objects", str(a.controller)],
                            trees[name])
                row[name]["controller"] = _per_unit(ctrl, "objects")
        rounds.append(row)
        print(f"round {i + 1}/{a.rounds} done (load {row['load']:.2f})", file=sys.stderr)
    summary: dict[str, dict[str, float]] = {}
    for kind in kinds:
        for label in rounds[0]["base"][kind]:
            ratios = [r["new"][kind][label] / r["base"][kind][label] for r in rounds
                      if label in r["new"][kind] and label in r["base"][kind]]
            summary[f"{kind} {label}"] = {
                "base_us": median([r["base"][kind][label] for r in rounds]),
                "new_us": median([r["new"][kind][label] for r in rounds]),
                "ratio_median": median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
    print("| row | base µs | new µs | new/base (median of rounds) | range |")
    print("|---|--:|--:|--:|---|")
    for label, s in summary.items():
        print(f"| {label} | {s['base_us']:.2f} | {s['new_us']:.2f} | {s['ratio_median']:.2f} "
              f"| {s['ratio_min']:.2f}-{s['ratio_max']:.2f} |")
    path = save_results("ab-trees", {
        "base": str(a.base), "new": str(a.new), "rounds": rounds, "summary": summary,
        "machine": machine(), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    })
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
