"""User-space instructions per watch event, counted by valgrind's callgrind: a measure this
VM's neighbours cannot move.

``watch_cpu --pace`` measures CPU time, which moved by up to ±40 % between rounds here (the
floor from 11.5 to 27.8 µs in one run): a 5 % change drowns in it. Instructions executed
are the same from run to run (within ~0.1 %), so a change to the per-read path shows as
what it is. They are not time: a cache miss or a syscall costs no more instructions than an
add, and the kernel's part (the recv and epoll calls, the same for every asyncio client) is
not counted. Use both: this to see a change, ``watch_cpu`` for what it costs.

Each client runs twice against the paced replay server (``--low`` and ``--high`` events,
one chunk each), under callgrind with instrumentation on only between the client's meter
start and stop (``benchmarks._common.Meter``); the difference over the extra events is the
per-event count, without what opening the watch costs. The pace is low (default 50 events
a second) so that a client slowed ~50x by valgrind still gets one event per read, as a
watch that keeps up does.

    python -m benchmarks.watch_instructions [--clients asyncio-floor,watchkeeper-watcher-lazy]
        [--body FILE] [--before SRC] [--low 100] [--high 600] [--pace 50]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, markdown_table, run_child, save_results
from benchmarks.watch_cpu import BEFORE, FLOOR, Replay, capture

DEFAULT_CLIENTS = ("asyncio-floor", "watchkeeper-watcher-lazy", "watchkeeper-watcher",
                   "lightkube")


def count(row: str, n: int, server: Replay, rv0: str, last_rv: str, body: Path,
          before: Path | None, out: Path) -> int:
    """Instructions the client ``row`` executed while watching ``n`` events."""
    child, src = row, str(ROOT / "src")
    if row.endswith(BEFORE):
        child, src = row[:-len(BEFORE)], str(before)
    result = out / f"{re.sub(r'[^a-z0-9-]', '_', row)}-{n}.callgrind"
    prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
              f"--callgrind-out-file={result}"]
    args = ["--child", child, "--kubeconfig", str(server.kubeconfig), "--namespace", "watch",
            "--rv", rv0, "--last-rv", last_rv, "--events", str(n), "--capture", str(body),
            "--server-pid", str(server.proc.pid)]
    res = run_child("watch_throughput", args, timeout=120 + n, prefix=prefix,
                    env={"PYTHONPATH": src, "WK_BENCH_CALLGRIND": "1"}, quiet=False)
    if not res.get("ok"):
        raise SystemExit(f"{row} ({n} events) failed: {res.get('error', '')[:400]}")
    text = result.read_text(errors="replace")
    totals = re.search(r"^totals: (\d+)", text, re.M)  # "summary" is 0 with --instr-atstart=no
    if totals is None:
        raise SystemExit(f"no instruction count in {result}")
    return int(totals.group(1))


def run(clients: list[str], body: Path, before: Path | None, low: int, high: int,
        pace: float) -> dict[str, Any]:
    meta = body.with_suffix(".rv")
    if body.exists() and meta.exists():
        rv0, last_rv = meta.read_text().split()
    else:
        info = capture(max(high, 1000), 1000, body)
        rv0, last_rv = info["rv_before"], info["rv_after"]
        meta.write_text(f"{rv0} {last_rv}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="wk-instr-") as tmp_s:
        tmp = Path(tmp_s)
        server = Replay(body, False, tmp, "event", "go", pace)
        try:
            for row in clients:
                lo = count(row, low, server, rv0, last_rv, body, before, tmp)
                hi = count(row, high, server, rv0, last_rv, body, before, tmp)
                per = (hi - lo) / (high - low)
                rows.append({"client": row, "instructions_low": lo, "instructions_high": hi,
                             "instructions_per_event": per})
                print(f"# {row:<40} {per:>10,.0f} instructions/event", file=sys.stderr)
        finally:
            server.stop()
    floor = next((r["instructions_per_event"] for r in rows if r["client"] == FLOOR), None)
    for r in rows:
        r["x_floor"] = r["instructions_per_event"] / floor if floor else None
    return {"rows": rows, "low": low, "high": high, "pace_events_per_s": pace,
            "body_bytes_per_event": body.stat().st_size / max(high, 1),
            "server": f"benchmarks._replay (paced: {pace:g} events/s, one chunk each)"}


def table(data: dict[str, Any]) -> str:
    return markdown_table(
        ["client", "instructions/event (user space)", "x asyncio-floor"],
        [[r["client"], f"{r['instructions_per_event']:,.0f}",
          f"{r['x_floor']:.2f}x" if r["x_floor"] else "—"] for r in data["rows"]])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", default=",".join(DEFAULT_CLIENTS))
    p.add_argument("--body", type=Path, required=True,
                   help="the captured watch body (made by the simulator if missing)")
    p.add_argument("--before", type=Path,
                   help="another tree's src: its watchkeeper rows are counted too")
    p.add_argument("--low", type=int, default=100)
    p.add_argument("--high", type=int, default=600)
    p.add_argument("--pace", type=float, default=50.0)
    a = p.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        p.error("needs valgrind (callgrind) on the PATH")
    if a.high <= a.low:
        p.error("--high must be above --low")
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    if a.before is not None:
        clients += [c + BEFORE for c in clients if c.startswith("watchkeeper")]
    t0 = time.time()
    data = run(clients, a.body, a.before, a.low, a.high, a.pace)
    data["before"] = str(a.before) if a.before else None
    data["seconds"] = time.time() - t0
    path = save_results("watch-instructions", data)
    print(table(data))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
