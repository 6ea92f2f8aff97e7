"""Client CPU per watch event, interleaved rounds, against a replay server (plain and TLS).

The simulator makes ``--events`` ConfigMap modifications once; their watch body is captured
(the same bytes every client receives) and served by ``benchmarks._replay`` from memory in
~256 KiB chunks, so the server costs next to nothing and events/s measures the client. Each
round runs every client once, in its own process, in an order rotated per round; the measure
is client CPU per event, and each watchkeeper row is compared with lightkube sync by the
median of the per-round ratios (same round, same machine load). The load average is
recorded per round. The client code is ``benchmarks.watch_throughput``'s.

``--loops asyncio,uvloop`` runs every asyncio client on each loop (rows ``NAME+uvloop``;
the sync clients have no loop and run once). ``--before SRC`` adds a row ``NAME (before)``
for each watchkeeper client, run from another tree's ``src`` in the same rounds (an A/B of a
change on the same machine load). Each row is also compared with the ``asyncio-floor`` row
of its own loop, when that runs, by the median of the same-round ratios.

With ``--framing go`` or ``event`` the replay server cuts the same bytes into the HTTP
chunks a kube-apiserver sends (see ``benchmarks._replay``); the default, ``bulk``, is ~256
KiB chunks. With ``--pace N`` it sends N events a second, one chunk each: a watch that keeps
up, where each client waits for each event (use ``--events`` of a few seconds' worth).

    python -m benchmarks.watch_cpu [--events 100000] [--rounds 7] [--tls] [--clients a,b]
                                   [--framing bulk|go|event] [--pace N] [--body FILE]
                                   [--loops asyncio,uvloop] [--before SRC]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import PYTHON, ROOT, fmt_num, markdown_table, run_child, save_results
from benchmarks._replay import FRAMINGS, go_tls_env

BASELINE = "lightkube"
DEFAULT_CLIENTS = (
    "watchkeeper-watcher-lazy", "watchkeeper-watcher", "watchkeeper-watcher-lazy-obj",
    "watchkeeper-stream", "watchkeeper-stream-lazy",
    "lightkube", "lightkube-async", "kubernetes", "kubernetes_asyncio",
)
FLOOR = "asyncio-floor"
SYNC = {"lightkube", "kubernetes", "raw-socket", "msgspec"}  # no event loop: run once
UVLOOP = "+uvloop"
BEFORE = " (before)"
# Peers this slow (≥ 40 µs per event) get fewer events per round: CPU per event is the measure.
SLOW = {"kubernetes_asyncio": 20_000, "kr8s": 10_000, "kopf": 5_000}


def capture(events: int, objects: int, path: Path) -> dict[str, Any]:
    """Make the modifications in the simulator and capture their watch body to ``path``."""
    from benchmarks._server import SimProcess
    from benchmarks.watch_throughput import NAMESPACE, raw_watch

    with SimProcess(history=events + objects + 1000) as sim:
        sim.call("seed", namespace=NAMESPACE, count=objects)
        mod = sim.call("modify", namespace=NAMESPACE, objects=objects, count=events)
        body, _ = raw_watch(str(sim.kubeconfig), NAMESPACE, str(mod["rv_before"]), events,
                            keep=True)
    path.write_bytes(body)
    return {"rv_before": str(mod["rv_before"]), "rv_after": str(mod["rv_after"])}


class Replay:
    """The replay server process."""

    def __init__(self, body: Path, tls: bool, tmp: Path, framing: str = "bulk",
                 tls_suites: str = "go", pace: float | None = None) -> None:
        self.kubeconfig = tmp / ("replay-tls.kubeconfig" if tls else "replay.kubeconfig")
        cmd = [PYTHON, "-m", "benchmarks._replay", "--body", str(body),
               "--kubeconfig", str(self.kubeconfig), "--framing", framing] + (
                   ["--tls"] if tls else []) + (["--pace", str(pace)] if pace else [])
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        if tls and tls_suites == "go":
            env.update(go_tls_env(tmp))
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"replay server did not start: {line!r}")
        self.port = int(line.split()[1])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def rows_for(clients: list[str], loops: list[str], before: Path | None) -> list[str]:
    """The rows to run: each client on each loop (a sync client once), then each
    watchkeeper row again from the ``before`` tree."""
    rows = [c + ("" if loop == "asyncio" else UVLOOP) for loop in loops for c in clients
            if loop == "asyncio" or c not in SYNC]
    if before is not None:
        rows += [r + BEFORE for r in rows if r.startswith("watchkeeper")]
    return rows


def child_of(row: str, before: Path | None) -> tuple[str, list[str], str]:
    """The child client, its extra arguments and its PYTHONPATH, for one row."""
    src = str(ROOT / "src")
    if row.endswith(BEFORE):
        row, src = row[:-len(BEFORE)], str(before)
    extra: list[str] = []
    if row.endswith(UVLOOP):
        row, extra = row[:-len(UVLOOP)], ["--loop", "uvloop"]
    return row, extra, src


def run(events: int, objects: int, rounds: int, clients: list[str], tls: bool,
        body_path: Path | None, framing: str = "bulk", tls_suites: str = "go",
        pace: float | None = None, before: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="wk-cpu-") as tmp_s:
        tmp = Path(tmp_s)
        body = body_path or tmp / "watch-body.jsonl"
        meta_file = body.with_suffix(".rv")
        if body.exists() and meta_file.exists():
            rv0, last_rv = meta_file.read_text().split()
        else:
            info = capture(events, objects, body)
            rv0, last_rv = info["rv_before"], info["rv_after"]
            meta_file.write_text(f"{rv0} {last_rv}")
        size = body.stat().st_size
        print(f"# capture: {size / 1e6:.1f} MB, {size / events:.0f} bytes/event", file=sys.stderr)
        server = Replay(body, tls, tmp, framing, tls_suites, pace)
        rows: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        loads: list[list[float]] = []
        try:
            for rnd in range(rounds):
                order = clients[rnd % len(clients):] + clients[:rnd % len(clients)]
                loads.append(list(os.getloadavg()))
                for name in order:
                    child, extra, src = child_of(name, before)
                    n = min(events, SLOW.get(child, events))
                    args = ["--child", child, "--kubeconfig", str(server.kubeconfig),
                            "--namespace", "watch", "--rv", rv0, "--last-rv", last_rv,
                            "--events", str(n), "--capture", str(body),
                            "--server-pid", str(server.proc.pid), *extra]
                    res = run_child("watch_throughput", args, timeout=60 + n / 500,
                                    env={"PYTHONPATH": src,
                                         "KUBECONFIG": str(server.kubeconfig)},
                                    server_pid=server.proc.pid, quiet=False)
                    res["round"] = rnd
                    if res.get("ok"):
                        res["cpu_us_per_event"] = res["cpu_s"] / res["events"] * 1e6
                    rows[name].append(res)
                    print(f"# round {rnd} {name:<30} "
                          + (f"{res['cpu_us_per_event']:6.2f} µs/event "
                             f"{res['events_per_s']:>9,.0f} ev/s" if res.get("ok")
                             else f"FAILED {res.get('error', '')[:200]}"), file=sys.stderr)
        finally:
            server.stop()
    data = summarize(rows, loads, events, size, rounds, tls)
    data["framing"] = framing
    if tls:
        data["tls_suites"] = tls_suites
    data["server"] = (f"benchmarks._replay (paced: {pace:g} events/s, one chunk each)" if pace
                      else f"benchmarks._replay (framing {framing})")
    data["pace_events_per_s"] = pace
    return data


def summarize(rows: dict[str, list[dict[str, Any]]], loads: list[list[float]], events: int,
              size: int, rounds: int, tls: bool) -> dict[str, Any]:
    base = {r["round"]: r for r in rows.get(BASELINE, []) if r.get("ok")}
    out = []
    for name, runs in rows.items():
        ok = [r for r in runs if r.get("ok")]
        ratios = [base[r["round"]]["cpu_us_per_event"] / r["cpu_us_per_event"]
                  for r in ok if r["round"] in base]
        floor_row = FLOOR + (UVLOOP if UVLOOP in name else "")
        floors = {r["round"]: r for r in rows.get(floor_row, []) if r.get("ok")}
        x_floor = [r["cpu_us_per_event"] / floors[r["round"]]["cpu_us_per_event"]
                   for r in ok if r["round"] in floors]
        out.append({
            "x_floor_median": statistics.median(x_floor) if x_floor else None,
            "x_floor_max": max(x_floor) if x_floor else None,
            "floor_row": floor_row if x_floor else None,
            "client": name, "ok_rounds": len(ok), "rounds": len(runs),
            "cpu_us_per_event_median": statistics.median(r["cpu_us_per_event"] for r in ok)
            if ok else None,
            "events_per_s_median": statistics.median(r["events_per_s"] for r in ok)
            if ok else None,
            "x_lightkube_median": statistics.median(ratios) if ratios else None,
            "x_lightkube_min": min(ratios) if ratios else None,
            "x_lightkube_max": max(ratios) if ratios else None,
            "events_per_round": ok[0]["events"] if ok else None,
            "errors": [r.get("error") for r in runs if not r.get("ok")][:2],
            "runs": [{k: r.get(k) for k in ("round", "cpu_s", "wall_s", "events",
                                              "events_per_s", "cpu_us_per_event",
                                              "server_cpu_s", "rss_peak_kb", "other_load")}
                     for r in runs],
        })
    return {"events": events, "rounds": rounds, "tls": tls, "body_bytes": size,
            "bytes_per_event": size / events,
            "loadavg_per_round": loads, "baseline": BASELINE, "results": out}


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in sorted(data["results"], key=lambda r: r["cpu_us_per_event_median"] or 1e9):
        rows.append([
            r["client"], fmt_num(r["cpu_us_per_event_median"], 2),
            fmt_num(r["x_lightkube_median"], 2) + "x" if r["x_lightkube_median"] else "—",
            (f"{r['x_lightkube_min']:.2f}-{r['x_lightkube_max']:.2f}"
             if r["x_lightkube_min"] else "—"),
            fmt_num(r.get("x_floor_median"), 2) + "x" if r.get("x_floor_median") else "—",
            fmt_num(r["events_per_s_median"]), f"{r['ok_rounds']}/{r['rounds']}",
            fmt_num(r["events_per_round"]),
        ])
    return markdown_table(["client", "CPU µs/event (median)", "vs lightkube sync (median of "
                           "same-round ratios)", "per-round range", "x its loop's asyncio-floor "
                           "(median of same-round ratios)", "events/s (median)",
                           "rounds ok", "events/round"], rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--objects", type=int, default=1_000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--tls", action="store_true", help="the replay server speaks TLS")
    p.add_argument("--clients", default=",".join(DEFAULT_CLIENTS))
    p.add_argument("--body", type=Path, help="reuse (or keep) the captured body here")
    p.add_argument("--framing", choices=FRAMINGS, default="bulk",
                   help="HTTP chunks of ~256 KiB (bulk), 2,048 bytes (go: kube-apiserver "
                        "while events queue up) or one per event (event: kube-apiserver "
                        "keeping up; the simulator frames both as it does)")
    p.add_argument("--tls-suites", choices=("go", "openssl"), default="go",
                   help="the replay server picks its TLS 1.3 suite as Go does (AES-128-GCM, "
                        "what a kube-apiserver negotiates) or as OpenSSL does (AES-256-GCM; "
                        "runs before 2026-12-05)")
    p.add_argument("--pace", type=float,
                   help="events a second, one chunk each (a watch that keeps up); "
                        "--framing is then ignored")
    p.add_argument("--loops", default="asyncio",
                   help="asyncio, uvloop or both (comma-separated): the children's event loop")
    p.add_argument("--before", type=Path,
                   help="another tree's src: its watchkeeper rows run in the same rounds")
    a = p.parse_args(argv)
    loops = [x.strip() for x in a.loops.split(",") if x.strip()]
    if set(loops) - {"asyncio", "uvloop"}:
        p.error(f"--loops: asyncio or uvloop, not {a.loops!r}")
    clients = rows_for([c.strip() for c in a.clients.split(",") if c.strip()], loops, a.before)
    t0 = time.time()
    data = run(a.events, a.objects, a.rounds, clients, a.tls, a.body, a.framing, a.tls_suites,
               a.pace, a.before)
    data["loops"] = loops
    data["before"] = str(a.before) if a.before else None
    data["seconds"] = time.time() - t0
    name = "watch-cpu" + ("-tls" if a.tls else "") + ("-uvloop" if "uvloop" in loops else "") + (
        "-openssl-suites" if a.tls and a.tls_suites == "openssl" else "") + (
        f"-paced-{a.pace:g}" if a.pace else
        "" if a.framing == "bulk" else f"-{a.framing}-chunks")
    path = save_results(name, data)
    print(table(data))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
