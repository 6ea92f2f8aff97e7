"""Kindness: what each client's watch loop sends to a server that is down or forbids it.

For each library, its typical long-running watch loop (the way its docs show one, wrapped in
the retry loop its users write when the library has none) watches ConfigMaps in one
namespace of a fresh simulator. Once it is watching, a fault is switched on for
``--duration`` seconds, then off, and the server is watched for ``--recovery`` seconds more:

- ``refused``: the listener is closed, so every connection attempt is refused by the kernel
  (open watches are reset first). The simulator cannot see refused attempts, so each run
  happens in its own network namespace (``unshare -n``), where the kernel's TCP counters
  (/proc/net/snmp: ActiveOpens) count every attempt and nothing else shares them. Without
  unshare the accept-and-reset form of the fault is used and counted by the simulator.
- ``forbidden``: the user's RBAC rules are revoked (403 on every request) and open watches
  are ended cleanly, so each client reconnects into the 403. Requests are counted in the
  simulator's request log.

A 10-minute outage x 6 libraries x 2 faults is over two hours, so the default is 60 s each,
reported per minute; ``--duration 600`` runs the full 10 minutes. Runs go one at a time
(each client has both cores to itself while its outage is measured); only the recovery
phase of one run overlaps the next run's setup and outage, when the earlier client is
idle (connected, or sleeping in its backoff). Every loop is bounded in time, the client and
the simulator are in child processes, and all traffic goes to 127.0.0.1.

    python -m benchmarks.kindness [--duration 60] [--faults refused,forbidden] [--clients ..]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    PYTHON,
    RESULT_TAG,
    ROOT,
    machine_busy_seconds,
    markdown_table,
    save_results,
    server_cpu_seconds,
    wait_for_quiet,
)

NAMESPACE = "kind"
USER = "bench"
OUTAGE_TAG = "@@OUTAGE "

CLIENTS: dict[str, str] = {
    "watchkeeper": "watchkeeper: wk.watcher (DefaultBackoff)",
    "kubernetes": "kubernetes (official): while True + watch.Watch().stream",
    "kubernetes_asyncio": "kubernetes_asyncio: while True + watch.Watch().stream",
    "lightkube": "lightkube: while True + Client.watch",
    "kr8s": "kr8s: while True + api.watch",
    "kopf": "kopf: operator with @kopf.on.event, default settings",
}
FAULTS = ("refused", "forbidden")


# -- the client loops (each in its own process, bounded by ``deadline``) ------------------------


@dataclass
class Tally:
    """What the client saw; printed when the process ends (also on SIGTERM)."""

    client: str
    events: int = 0
    errors: int = 0
    error_types: dict[str, int] = field(default_factory=dict)
    exited: str | None = None  # why the loop ended by itself, if it did

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        name = type(exc).__name__
        self.error_types[name] = self.error_types.get(name, 0) + 1

    def emit(self) -> None:
        sys.stdout.write(RESULT_TAG + json.dumps(vars(self)) + "\n")
        sys.stdout.flush()


def _loop_kubernetes(a: argparse.Namespace, t: Tally) -> None:
    from kubernetes import client, config, watch

    config.load_kube_config(config_file=a.kubeconfig)
    v1 = client.CoreV1Api()
    while time.monotonic() < a.deadline:
        try:
            w = watch.Watch()
            for _ev in w.stream(v1.list_namespaced_config_map, a.namespace):
                t.events += 1
        except Exception as exc:
            t.error(exc)


def _loop_kubernetes_asyncio(a: argparse.Namespace, t: Tally) -> None:
    from kubernetes_asyncio import client, config, watch

    async def main() -> None:
        await config.load_kube_config(config_file=a.kubeconfig)
        v1 = client.CoreV1Api()
        while time.monotonic() < a.deadline:
            try:
                async with watch.Watch() as w:
                    async for _ev in w.stream(v1.list_namespaced_config_map, a.namespace):
                        t.events += 1
            except Exception as exc:
                t.error(exc)

    asyncio.run(main())


def _loop_lightkube(a: argparse.Namespace, t: Tally) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    client = Client(KubeConfig.from_file(a.kubeconfig))
    while time.monotonic() < a.deadline:
        try:
            for _op, _obj in client.watch(ConfigMap, namespace=a.namespace):
                t.events += 1
        except Exception as exc:
            t.error(exc)


def _loop_kr8s(a: argparse.Namespace, t: Tally) -> None:
    import kr8s.asyncio

    async def main() -> None:
        api = await kr8s.asyncio.api(kubeconfig=a.kubeconfig)
        while time.monotonic() < a.deadline:
            try:
                async for _ev, _obj in api.watch("configmaps", namespace=a.namespace):
                    t.events += 1
            except Exception as exc:
                t.error(exc)

    asyncio.run(main())


def _loop_kopf(a: argparse.Namespace, t: Tally) -> None:
    import logging

    import kopf

    logging.basicConfig(level=logging.WARNING)

    @kopf.on.event("v1", "configmaps")
    async def on_event(**_: Any) -> None:
        t.events += 1

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(max(0.0, a.deadline - time.monotonic()), stop.set)
        try:
            await kopf.operator(standalone=True, namespaces=[a.namespace], stop_flag=stop)
        except Exception as exc:
            t.error(exc)

    asyncio.run(main())


def _loop_watchkeeper(a: argparse.Namespace, t: Tally) -> None:
    import watchkeeper as wk

    async def main() -> None:
        async with wk.Client(wk.ClientConfig.from_kubeconfig(a.kubeconfig)) as client:
            api = client.api("configmaps", namespace=a.namespace)
            # max_unhealthy=None: keep retrying through the whole outage (the default, 300 s,
            # would end the process after 5 minutes so that the pod restarts visibly).
            w = wk.watcher(api, wk.WatchConfig(max_unhealthy=None))
            try:
                async with asyncio.timeout(max(0.0, a.deadline - time.monotonic())):
                    async for ev in w:
                        if isinstance(ev, wk.WatchError):
                            t.error(ev.error)
                        elif isinstance(ev, wk.Apply | wk.Delete | wk.InitApply):
                            t.events += 1
            except TimeoutError:
                pass

    asyncio.run(main())


LOOPS: dict[str, Callable[[argparse.Namespace, Tally], None]] = {
    "watchkeeper": _loop_watchkeeper,
    "kubernetes": _loop_kubernetes,
    "kubernetes_asyncio": _loop_kubernetes_asyncio,
    "lightkube": _loop_lightkube,
    "kr8s": _loop_kr8s,
    "kopf": _loop_kopf,
}


def client_main(a: argparse.Namespace) -> None:
    tally = Tally(a.client)

    def on_term(signum: int, frame: Any) -> None:
        tally.emit()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(max(1.0, a.deadline - time.monotonic())) + 30)  # a hard backstop
    try:
        LOOPS[a.client](a, tally)
        # kopf handles SIGTERM itself and returns: that is no exit of its own accord
        if time.monotonic() < a.deadline and not os.path.exists(a.stop_file):
            tally.exited = f"the watch loop returned by itself at {time.monotonic():.1f}"
    except BaseException as exc:
        tally.error(exc)
        tally.exited = f"{type(exc).__name__}: {exc}"[:300]
    tally.emit()


# -- one measured run: simulator + client, in a network namespace of its own ---------------------


def _tcp_counters() -> dict[str, int]:
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:], strict=True)}


def _lo_up() -> None:
    ip = shutil.which("ip") or "/usr/sbin/ip"
    subprocess.run([ip, "link", "set", "lo", "up"], check=True)


def one_main(a: argparse.Namespace) -> None:
    """Runs inside ``unshare -n`` (or not, with ``--no-netns``): prints @@OUTAGE, then
    @@RESULT."""
    from benchmarks._server import SimProcess

    if a.netns:
        _lo_up()
    out: dict[str, Any] = {"client": a.one, "fault": a.fault, "duration_s": a.duration,
                           "netns": a.netns, "ok": True}
    tmp = tempfile.mkdtemp(prefix="wk-kind-")
    kc = str(Path(tmp) / "bench.kubeconfig")
    with SimProcess() as sim:
        sim.call("user", name=USER, namespace=NAMESPACE, kubeconfig=kc)
        sim.call("seed", namespace=NAMESPACE, count=10)
        deadline = time.monotonic() + 90 + a.duration + a.recovery
        log_path = Path(tmp) / "client.out"
        stop_file = Path(tmp) / "stopping"
        with open(log_path, "w") as log_file:
            client = subprocess.Popen(
                [PYTHON, "-m", "benchmarks.kindness", "--client", a.one, "--kubeconfig", kc,
                 "--namespace", NAMESPACE, "--deadline", f"{deadline:.3f}",
                 "--stop-file", str(stop_file)],
                cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": kc},
            )
        try:
            _measure(a, sim, client, out)
        finally:
            stop_file.touch()
            if client.poll() is None:
                client.terminate()
                try:
                    client.wait(30)  # kopf shuts down gracefully on SIGTERM
                except subprocess.TimeoutExpired:
                    client.kill()
                    client.wait()
        text = log_path.read_text(errors="replace")
        tallies = [json.loads(line[len(RESULT_TAG):]) for line in text.splitlines()
                   if line.startswith(RESULT_TAG)]
        out["client_side"] = tallies[-1] if tallies else None
        other = [line for line in text.splitlines() if not line.startswith(RESULT_TAG)]
        out["client_log_lines"] = len(other)
        out["client_log_tail"] = other[-8:]
    shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(RESULT_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


def _measure(a: argparse.Namespace, sim: Any, client: subprocess.Popen[bytes],
             out: dict[str, Any]) -> None:
    # 1. wait until the client is watching (a watch request of our user still open)
    t_start = time.monotonic()
    watching = False
    while time.monotonic() - t_start < 60 and client.poll() is None:
        recs = sim.call("requests", user=USER, detail=True)["records"]
        if any(_is_cm_watch(r) and r["status"] in (None, 200) for r in recs):
            watching = True
            break
        time.sleep(0.2)
    out["startup_s"] = time.monotonic() - t_start
    out["startup_requests"] = sim.call("requests", user=USER)["by_verb_status"]
    if not watching:
        out["ok"] = False
        out["error"] = ("the client never opened a watch (exit status "
                        f"{client.poll()}); its requests: {out['startup_requests']}")
        _print_outage(out)
        return
    time.sleep(2.0)
    # 2. the fault
    counted_by_server = a.fault == "refused" and not a.netns
    k0 = _tcp_counters()
    cpu0 = (machine_busy_seconds(), server_cpu_seconds(client.pid), server_cpu_seconds(sim.pid))
    t0 = sim.call("ping")["now"]
    if a.fault == "refused":
        sim.call("refuse", count_refused=counted_by_server)
    else:
        sim.call("revoke", name=USER)
        sim.call("stop_watches")
    c0 = sim.call("requests")["connections"]
    samples: list[tuple[float, int]] = []
    end = time.monotonic() + a.duration
    while (now := time.monotonic()) < end:
        samples.append((now - t0, _tcp_counters()["ActiveOpens"] - k0["ActiveOpens"]))
        time.sleep(min(1.0, max(0.0, end - now)))
    k1 = _tcp_counters()
    cpu1 = (machine_busy_seconds(), server_cpu_seconds(client.pid), server_cpu_seconds(sim.pid))
    log = sim.call("requests", user=USER, since=t0, until=t0 + a.duration)
    c1 = log["connections"]
    t_clear = sim.call("ping")["now"]
    if a.fault == "refused":
        sim.call("clear")
    else:
        sim.call("grant", name=USER)
    # 3. what was sent during the outage
    minutes = a.duration / 60.0
    times = [t - t0 for t in log["times"]]
    attempts = k1["ActiveOpens"] - k0["ActiveOpens"]
    out.update(
        http_requests=log["count"],
        http_by_verb_status=log["by_verb_status"],
        http_by_resource=log["by_resource"],
        tcp_connect_attempts=attempts if a.netns else None,
        tcp_refused=(k1["AttemptFails"] - k0["AttemptFails"]) if a.netns else None,
        tcp_accepted=(k1["PassiveOpens"] - k0["PassiveOpens"]) if a.netns else None,
        server_accepted=c1 - c0,
        client_alive_at_end=client.poll() is None,
        client_cpu_s=cpu1[1] - cpu0[1],
        server_cpu_s=cpu1[2] - cpu0[2],
        other_load=max(0.0, (cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1]) - (cpu1[2] - cpu0[2]))
        / a.duration,
    )
    if a.fault == "refused":
        total = attempts if a.netns else c1 - c0
        out["counted"] = "TCP connect attempts (kernel, own netns)" if a.netns else (
            "connections accepted and reset by the simulator")
        series = [(t, n) for t, n in samples] if a.netns else []
        last_10 = _last_window(series, a.duration, 10.0) if series else None
        last_at = _last_change(series)
    else:
        total = log["count"]
        out["counted"] = "HTTP requests (simulator request log)"
        last_10 = sum(1 for t in times if t >= a.duration - 10.0)
        last_at = max(times) if times else None
    out.update(total=total, per_minute=total / minutes, last_10s=last_10,
               last_at_s=last_at, first_10s=_first_window(samples, times, a.fault, a.netns))
    _print_outage(out)
    # 4. recovery: a watch that the server answers normally after the fault went away
    recovered_at = None
    rec_end = time.monotonic() + a.recovery
    while time.monotonic() < rec_end and client.poll() is None:
        recs = sim.call("requests", user=USER, since=t_clear, detail=True)["records"]
        ok = [r for r in recs if _is_cm_watch(r) and r["status"] in (None, 200)]
        if ok:
            recovered_at = ok[0]["t"] - t_clear
            break
        time.sleep(0.5)
    out["recovered_after_s"] = recovered_at
    out["recovery_window_s"] = a.recovery


def _is_cm_watch(r: dict[str, Any]) -> bool:
    return bool(r["verb"] == "watch" and r["path"].endswith("/configmaps"))


def _last_window(series: list[tuple[float, int]], duration: float, window: float) -> int:
    before = [n for t, n in series if t <= duration - window]
    return series[-1][1] - (before[-1] if before else 0)


def _last_change(series: list[tuple[float, int]]) -> float | None:
    last = None
    prev = 0
    for t, n in series:
        if n != prev:
            last, prev = t, n
    return last


def _first_window(samples: list[tuple[float, int]], times: list[float], fault: str,
                  netns: bool) -> int | None:
    if fault == "refused":
        if not netns:
            return None
        within = [n for t, n in samples if t <= 10.0]
        return within[-1] if within else 0
    return sum(1 for t in times if t < 10.0)


def _print_outage(out: dict[str, Any]) -> None:
    sys.stdout.write(OUTAGE_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


# -- the parent ------------------------------------------------------------------------------


def netns_available() -> bool:
    unshare = shutil.which("unshare")
    if not unshare or os.geteuid() != 0:
        return False
    probe = subprocess.run([unshare, "-n", "--", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def run(duration: float = 60.0, faults: list[str] | None = None,
        clients: list[str] | None = None, recovery: float | None = None) -> dict[str, Any]:
    faults = faults or list(FAULTS)
    clients = clients or list(CLIENTS)
    recovery = recovery if recovery is not None else min(65.0, 2 * duration + 5)
    netns = netns_available()
    prefix = ["unshare", "-n", "--"] if netns else []
    pending: list[tuple[subprocess.Popen[str], dict[str, Any], Any]] = []
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    for fault in faults:
        for name in clients:
            cmd = [*prefix, PYTHON, "-m", "benchmarks.kindness", "--one", name, "--fault", fault,
                   "--duration", str(duration), "--recovery", str(recovery)]
            if netns:
                cmd.append("--netns")
            wait_for_quiet()
            err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed below)
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                                    text=True)
            outage = _wait_outage(proc, timeout=duration + 150)
            print(f"# kindness {fault:<9} {name:<19} " + _summary(outage), file=sys.stderr)
            pending.append((proc, outage, err))
    for proc, outage, err in pending:
        try:
            proc.wait(timeout=recovery + 90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        err.seek(0)
        stderr = err.read()
        err.close()
        final = next((json.loads(line[len(RESULT_TAG):]) for line in stdout.splitlines()
                      if line.startswith(RESULT_TAG)), None)
        if final is None:
            final = {**outage, "ok": False,
                     "error": (outage.get("error") or "") + " " + stderr.strip()[-600:]}
        results.append(final)
    return {"duration_s": duration, "recovery_s": recovery, "netns": netns,
            "namespace": NAMESPACE, "elapsed_s": time.monotonic() - started,
            "results": results}


def _wait_outage(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """The @@OUTAGE line of a run (it goes on into its recovery phase in the background)."""
    assert proc.stdout is not None
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        while line := proc.stdout.readline():
            if line.startswith(OUTAGE_TAG):
                result: dict[str, Any] = json.loads(line[len(OUTAGE_TAG):])
                return result
    finally:
        watchdog.cancel()
    return {"ok": False, "error": f"no outage result (exit status {proc.poll()})"}


def _summary(o: dict[str, Any]) -> str:
    if not o.get("ok"):
        return f"FAILED: {o.get('error')}"
    return (f"{o['total']:>7,} in {o['duration_s']:.0f} s ({o['per_minute']:>9,.0f}/min; "
            f"first 10 s {o.get('first_10s')}, last 10 s {o.get('last_10s')})")


def table(data: dict[str, Any]) -> str:
    rows = []
    for r in data["results"]:
        label = CLIENTS.get(r.get("client", ""), r.get("client", "?"))
        if not r.get("ok"):
            rows.append([label, r.get("fault", "?"), "FAILED", "—", "—", "—", "—", "—", "—",
                         "—", (r.get("error") or "")[:160]])
            continue
        side = r.get("client_side") or {}
        rec = r.get("recovered_after_s")
        note = _note(r, side)
        rows.append([
            label, r["fault"], f"{r['total']:,}", f"{r['per_minute']:,.0f}",
            "—" if r.get("first_10s") is None else f"{r['first_10s']:,}",
            "—" if r.get("last_10s") is None else f"{r['last_10s']:,}",
            "—" if r.get("last_at_s") is None else f"{r['last_at_s']:.0f}",
            f"not within {r.get('recovery_window_s', 0):.0f} s" if rec is None
            else f"{rec:.1f} s",
            f"{r.get('client_cpu_s', float('nan')):.1f}",
            f"{r.get('server_cpu_s', float('nan')):.1f}",
            note,
        ])
    return markdown_table(
        ["client (loop)", "fault", "sent in outage", "per minute", "first 10 s", "last 10 s",
         "last one at s", "watching again after", "client CPU s", "server CPU s", "notes"],
        rows,
    )


def _note(r: dict[str, Any], side: dict[str, Any]) -> str:
    parts = []
    by_res = r.get("http_by_resource") or {}
    if len(by_res) > 1:
        parts.append("requests by resource: " + ", ".join(
            f"{k} {v}" for k, v in sorted(by_res.items())))
    if r["fault"] == "forbidden" and r.get("tcp_accepted") is not None:
        parts.append(f"{r['tcp_accepted']:,} new TCP connections")
    if r["fault"] == "refused" and r.get("http_requests"):
        parts.append(f"{r['http_requests']} HTTP requests")
    if not r.get("client_alive_at_end"):
        parts.append("client process exited")
    if side.get("exited"):
        parts.append(f"loop ended: {side['exited'][:80]}")
    kinds = side.get("error_types") or {}
    if kinds:
        parts.append("errors seen: " + ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items())))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="outage seconds per run")
    p.add_argument("--recovery", type=float, default=None,
                   help="seconds to wait for a client to watch again (default: min(65, 2D+5))")
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--json", action="store_true")
    # internal modes
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--fault", help=argparse.SUPPRESS)
    p.add_argument("--netns", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    p.add_argument("--stop-file", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.client:
        client_main(a)
        return
    if a.one:
        if a.recovery is None:
            a.recovery = min(65.0, 2 * a.duration + 5)
        one_main(a)
        return
    faults = [f.strip() for f in a.faults.split(",") if f.strip()]
    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    if set(faults) - set(FAULTS) or set(clients) - set(CLIENTS):
        p.error(f"faults: {', '.join(FAULTS)}; clients: {', '.join(CLIENTS)}")
    data = run(a.duration, faults, clients, a.recovery)
    path = save_results("kindness", data)
    print(table(data))
    if a.json:
        print(json.dumps(data, indent=2))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
