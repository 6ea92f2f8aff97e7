"""Admission round-trip latency and throughput over TLS, open loop: watchkeeper's
``WebhookServer`` next to kopf's webhook server, interleaved in one run.

Each server runs in a process of its own with the same serving certificate (ECDSA P-256,
signed by a CA made here) and two handlers on ConfigMaps: a validating one (a small check of
the object) and a mutating one (adds a label, answered with a JSON patch).

* ``watchkeeper``: ``WebhookServer`` with dict handlers, TLS from ``ServingTLS`` (what a
  ``CertificateManager`` gives it: the certificate picked per handshake).
* ``watchkeeper-typed``: the same with ``model=wk.k8s.ConfigMap`` (typed objects in, a typed
  object out of the mutating handler).
* ``kopf``: ``kopf.WebhookServer`` given the certificate files, ``@kopf.on.validate`` and
  ``@kopf.on.mutate`` (async handlers: kopf runs sync ones in a thread pool), in a kopf
  operator (``standalone``) pointed at the simulator in another process, which it needs for
  discovery; kopf's logging at WARNING.

The load generator, a process of its own, is an aiohttp client that verifies the server's
certificate against the CA and keeps its connections alive (up to ``CONNECTIONS``; HTTP/1.1,
as kube-apiserver speaks to an aiohttp server, which offers no h2). It sends the
AdmissionReview v1 that kube-apiserver 1.28.7 sent for a ConfigMap create
(``benchmarks/admission_review.json``, recorded with ``--record``; a fresh uid per request),
alternating the mutating and the validating path, **open loop**: request i is due at
``start + i / rate`` whether or not earlier ones have come back, and its latency is measured
from that due time, so a server that falls behind shows it. After ``--warmup`` seconds at the
same rate (not measured) it measures ``--seconds``: p50, p99 and max latency, the reviews
answered per second, errors (a status other than 200, a wrong uid, a refusal, a missing
patch, or no answer within 10 s: kube-apiserver's default webhook timeout), and the server
process's CPU per review (from /proc over the measured interval).

    python -m benchmarks.webhook_latency [--rates 200,1000] [--seconds 15] [--warmup 3]
                                         [--rounds 2] [--servers watchkeeper,kopf]
    python -m benchmarks.webhook_latency --record /tmp/realk8s/kubeconfig-admin
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._common import (
    PYTHON,
    ROOT,
    ChildReport,
    configmap_body,
    fmt_num,
    markdown_table,
    run_child,
    save_results,
    server_cpu_seconds,
)

REVIEW = Path(__file__).resolve().parent / "admission_review.json"
SERVERS = {
    "watchkeeper": "watchkeeper WebhookServer (dicts)",
    "watchkeeper-typed": "watchkeeper WebhookServer (typed wk.k8s.ConfigMap)",
    "kopf": "kopf WebhookServer (@kopf.on.validate / mutate)",
}
PATHS = ("/mutate", "/validate")
CONNECTIONS = 100  # the most keep-alive connections the load generator opens
REQUEST_TIMEOUT = 10.0  # kube-apiserver's default timeoutSeconds for a webhook
LABEL = "stamped-by"


# -- the servers (one process each) ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(obj: dict[str, Any] | None) -> str | None:
    """The validating handlers' small check; a message when the object fails it."""
    obj = obj or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if "app.kubernetes.io/name" not in labels:
        return "a ConfigMap needs the label app.kubernetes.io/name"
    if len((obj.get("data") or {}).get("payload", "")) > 4096:
        return "data.payload is longer than 4096 characters"
    return None


async def _serve_watchkeeper(a: argparse.Namespace, pem: tuple[bytes, bytes], typed: bool
                             ) -> None:
    import watchkeeper as wk

    tls = wk.webhooks.ServingTLS()
    tls.update(*pem)
    server = wk.webhooks.WebhookServer(tls, port=a.port)
    model = wk.k8s.ConfigMap if typed else None

    @server.validating("/validate", model=model)
    async def validate(req: wk.webhooks.AdmissionRequest[Any]) -> None:
        obj = req.object
        problem = _check(wk.to_dict(obj) if typed and obj is not None else obj)
        if problem:
            raise wk.webhooks.Denied(problem)

    @server.mutating("/mutate", model=model)
    async def mutate(req: wk.webhooks.AdmissionRequest[Any]) -> Any:
        if typed:
            cm = req.object
            cm.metadata.labels = {**(cm.metadata.labels or {}), LABEL: "watchkeeper"}
            return cm
        obj = dict(req.object or {})
        meta = dict(obj["metadata"])
        meta["labels"] = {**(meta.get("labels") or {}), LABEL: "watchkeeper"}
        return {**obj, "metadata": meta}

    await server.start()
    print(f"READY {server.port}", flush=True)
    try:
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin
    finally:
        await server.stop()


async def _serve_kopf(a: argparse.Namespace, probe: bytes) -> None:
    import logging

    import kopf

    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    stop = asyncio.Event()

    @kopf.on.startup()
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.admission.managed = None  # the configurations are not kopf's to write
        settings.admission.server = kopf.WebhookServer(
            addr="127.0.0.1", port=a.port, certfile=a.cert, pkeyfile=a.key)

    @kopf.on.validate("configmaps", id="validate")
    async def validate(body: Any, **_: Any) -> None:
        problem = _check(dict(body))
        if problem:
            raise kopf.AdmissionError(problem)

    @kopf.on.mutate("configmaps", id="mutate")
    async def mutate(patch: Any, **_: Any) -> None:
        patch.setdefault("metadata", {}).setdefault("labels", {})[LABEL] = "kopf"

    async def until_stdin_closes() -> None:
        await asyncio.to_thread(sys.stdin.read)
        stop.set()

    async def ready() -> None:
        """READY once kopf's server answers a review (discovery done, handlers known)."""
        import aiohttp

        trust = ssl.create_default_context(cafile=a.ca)
        async with aiohttp.ClientSession() as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.post(f"https://127.0.0.1:{a.port}/validate", data=probe,
                                            ssl=trust) as resp:
                        if resp.status == 200:
                            break
                await asyncio.sleep(0.2)
        print(f"READY {a.port}", flush=True)

    waiter = asyncio.create_task(until_stdin_closes())
    ready_task = asyncio.create_task(ready())
    try:
        await kopf.operator(standalone=True, namespaces=["default"], stop_flag=stop)
    finally:
        ready_task.cancel()
        waiter.cancel()
        await asyncio.gather(ready_task, return_exceptions=True)


def serve_main(a: argparse.Namespace) -> None:
    if a.serve == "kopf":
        asyncio.run(_serve_kopf(a, REVIEW.read_bytes()))
    else:
        pem = (Path(a.cert).read_bytes(), Path(a.key).read_bytes())
        asyncio.run(_serve_watchkeeper(a, pem, typed=a.serve == "watchkeeper-typed"))


class ServerProcess:
    """A server child: started, READY read, stopped by closing its stdin."""

    def __init__(self, name: str, certs: dict[str, Path], kubeconfig: Path | None) -> None:
        self.name = name
        port = free_port()
        cmd = [PYTHON, "-m", "benchmarks.webhook_latency", "--serve", name, "--port", str(port),
               "--cert", str(certs["cert"]), "--key", str(certs["key"]),
               "--ca", str(certs["ca"])]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.stop()
            raise RuntimeError(f"{name} server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the load generator (a child) -----------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0-100) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Load:
    """One open-loop phase's outcome."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.lags: list[float] = []  # how late each request left (the generator's own delay)
        self.errors: list[str] = []
        self.last_done = 0.0


async def _one(session: Any, url: str, body: bytes, uid: str, due: float, mutating: bool,
               out: Load | None) -> None:
    loop = asyncio.get_running_loop()
    lag = loop.time() - due
    error = None
    try:
        async with session.post(url, data=body,
                                headers={"Content-Type": "application/json"}) as resp:
            data = await resp.read()
            if resp.status != 200:
                error = f"HTTP {resp.status}: {data[:200]!r}"
            else:
                answer = json.loads(data)["response"]
                if answer.get("uid") != uid:
                    error = "wrong uid"
                elif not answer.get("allowed"):
                    error = f"refused: {answer.get('status')}"
                elif mutating and not answer.get("patch"):
                    error = "no patch"
    except Exception as exc:  # every failure is counted, none is raised
        error = f"{type(exc).__name__}: {exc}"
    done = loop.time()
    if out is None:
        return
    out.lags.append(lag)
    out.last_done = max(out.last_done, done)
    if error:
        out.errors.append(error)
    else:
        out.latencies.append(done - due)


async def _phase(session: Any, base: str, template: bytes, old_uid: bytes, rate: float,
                 seconds: float, first: int, out: Load | None) -> float:
    """Send ``rate * seconds`` reviews, each at its due time; return the start time."""
    loop = asyncio.get_running_loop()
    n = int(rate * seconds)
    start = loop.time() + 0.05
    tasks = []
    for i in range(n):
        due = start + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        uid = str(uuid.UUID(int=first + i))
        mutating = i % 2 == 0
        url = base + PATHS[0 if mutating else 1]
        body = template.replace(old_uid, uid.encode())
        tasks.append(asyncio.create_task(_one(session, url, body, uid, due, mutating, out)))
    await asyncio.gather(*tasks)
    return start


async def load_main(a: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    template = REVIEW.read_bytes()
    old_uid = json.loads(template)["request"]["uid"].encode()
    trust = ssl.create_default_context(cafile=a.ca)
    connector = aiohttp.TCPConnector(ssl=trust, limit=CONNECTIONS, limit_per_host=CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await _phase(session, a.url, template, old_uid, a.rate, a.warmup, 0, None)
        out = Load()
        cpu0, own0 = server_cpu_seconds(a.server_pid), time.process_time()
        start = await _phase(session, a.url, template, old_uid, a.rate, a.seconds, 10**9, out)
        cpu = server_cpu_seconds(a.server_pid) - cpu0
        own = time.process_time() - own0
    ok = len(out.latencies)
    sent = int(a.rate * a.seconds)
    wall = max(out.last_done - start, 1e-9)
    lat_ms = [x * 1000 for x in out.latencies]
    return {
        "rate": a.rate, "seconds": a.seconds, "sent": sent, "answered": ok,
        "errors": len(out.errors), "error_samples": sorted(set(out.errors))[:3],
        "p50_ms": percentile(lat_ms, 50), "p90_ms": percentile(lat_ms, 90),
        "p99_ms": percentile(lat_ms, 99), "max_ms": max(lat_ms) if lat_ms else None,
        "mean_ms": statistics.fmean(lat_ms) if lat_ms else None,
        "answered_per_s": ok / wall, "wall_s": wall,
        "server_cpu_s": cpu, "server_cpu_ms_per_review": cpu / ok * 1000 if ok else None,
        "server_cores": cpu / wall,
        "loadgen_cpu_s": own, "loadgen_cores": own / wall,
        "send_lag_p99_ms": percentile([x * 1000 for x in out.lags], 99),
    }


def child_main(a: argparse.Namespace) -> None:
    report = ChildReport(a.child)
    try:
        report.extra = asyncio.run(load_main(a))
    except BaseException as exc:  # a run that cannot work is reported, not hidden
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"[:800]
    report.emit()


# -- the parent -----------------------------------------------------------------------------


def make_certs(tmp: Path) -> dict[str, Path]:
    """One CA and one serving certificate for 127.0.0.1 (ECDSA P-256, as
    ``CertificateManager`` makes them), shared by every server."""
    import trustme

    ca = trustme.CA()
    serving = ca.issue_cert("127.0.0.1", "localhost")
    paths = {"ca": tmp / "ca.crt", "cert": tmp / "tls.crt", "key": tmp / "tls.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    serving.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    fd = os.open(paths["key"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(serving.private_key_pem.bytes())
    return paths


def run(rates: list[float], seconds: float, warmup: float, rounds: int,
        servers: list[str]) -> dict[str, Any]:
    from benchmarks._server import SimProcess

    results: list[dict[str, Any]] = []
    loads: list[list[float]] = []
    with tempfile.TemporaryDirectory(prefix="wk-whl-") as tmp_s, contextlib.ExitStack() as stack:
        certs = make_certs(Path(tmp_s))
        sim = stack.enter_context(SimProcess()) if "kopf" in servers else None
        running: dict[str, ServerProcess] = {}
        for name in servers:
            srv = ServerProcess(name, certs, sim.kubeconfig if sim else None)
            stack.callback(srv.stop)
            running[name] = srv
        print("# servers: " + ", ".join(f"{n} pid {s.proc.pid}" for n, s in running.items()),
              file=sys.stderr)
        for rnd in range(rounds):
            for rate in rates:
                k = rnd % len(servers)
                for name in servers[k:] + servers[:k]:
                    srv = running[name]
                    loads.append(list(os.getloadavg()))
                    args = ["--child", name, "--url", srv.url, "--ca", str(certs["ca"]),
                            "--rate", str(rate), "--seconds", str(seconds),
                            "--warmup", str(warmup), "--server-pid", str(srv.proc.pid)]
                    res = run_child("webhook_latency", args, timeout=warmup + seconds + 60,
                                    env={"PYTHONPATH": str(ROOT / "src")},
                                    server_pid=srv.proc.pid)
                    res.update(server=name, label=SERVERS[name], round=rnd, rate=rate)
                    results.append(res)
                    print(f"# round {rnd} {rate:>6g}/s {name:<18} " + (
                        f"p50 {res['p50_ms']:.2f} ms, p99 {res['p99_ms']:.2f} ms, "
                        f"{res['answered_per_s']:.0f}/s, {res['errors']} errors, "
                        f"{res['server_cpu_ms_per_review']:.3f} ms CPU/review, "
                        f"other load {res['other_load']:.2f}"
                        if res.get("ok") and res.get("answered")
                        else f"FAILED {res.get('error')} {res.get('error_samples')}"),
                        file=sys.stderr)
    return {"rates": rates, "seconds": seconds, "warmup": warmup, "rounds": rounds,
            "connections": CONNECTIONS, "review_bytes": REVIEW.stat().st_size,
            "loadavg_per_run": loads, "results": results, "summary": summarize(results)}


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per server and rate: the median over rounds of each number, errors summed."""
    out = []
    keys = sorted({(r["rate"], r["server"]) for r in results},
                  key=lambda k: (k[0], list(SERVERS).index(k[1])))
    for rate, name in keys:
        runs = [r for r in results if (r["rate"], r["server"]) == (rate, name)]
        ok = [r for r in runs if r.get("ok") and r.get("answered")]

        def med(key: str, ok: list[dict[str, Any]] = ok) -> float | None:
            vals = [r[key] for r in ok if r.get(key) is not None]
            return statistics.median(vals) if vals else None

        out.append({
            "rate": rate, "server": name, "label": SERVERS[name],
            "runs": len(runs), "ok_runs": len(ok),
            "p50_ms": med("p50_ms"), "p99_ms": med("p99_ms"), "max_ms": med("max_ms"),
            "answered_per_s": med("answered_per_s"),
            "errors": sum(int(r.get("errors") or 0) for r in ok),
            "failed_runs": [r.get("error") for r in runs if r not in ok][:2],
            "p50_ms_runs": [r["p50_ms"] for r in ok], "p99_ms_runs": [r["p99_ms"] for r in ok],
            "server_cpu_ms_per_review": med("server_cpu_ms_per_review"),
            "loadgen_cores": med("loadgen_cores"), "other_load": med("other_load"),
            "send_lag_p99_ms": med("send_lag_p99_ms"),
        })
    return out


def _runs(values: list[float]) -> str:
    return " / ".join(fmt_num(v, 1 if v < 100 else 0) for v in values)


def table(data: dict[str, Any]) -> str:
    """Medians over the rounds; the p99 of each round beside them (a shared machine)."""
    rows = []
    for s in data["summary"]:
        if not s["ok_runs"]:
            rows.append([fmt_num(s["rate"]), s["label"], "FAILED", *["—"] * 7])
            continue
        rows.append([
            fmt_num(s["rate"]), s["label"], fmt_num(s["p50_ms"], 2), fmt_num(s["p99_ms"], 2),
            _runs(s["p99_ms_runs"]), fmt_num(s["answered_per_s"]), fmt_num(s["errors"]),
            fmt_num(s["server_cpu_ms_per_review"], 3), fmt_num(s["loadgen_cores"], 2),
            fmt_num(s["other_load"], 2),
        ])
    return markdown_table(["reviews/s sent", "server", "p50 ms", "p99 ms", "p99 ms per round",
                           "answered/s", "errors", "server CPU ms/review", "load generator CPUs",
                           "other load"], rows)


# -- recording the review a real kube-apiserver sends ---------------------------------------


async def record(kubeconfig: str, prefix: str) -> dict[str, Any]:
    """Serve a validating webhook to the cluster of ``kubeconfig``, create one ConfigMap in a
    namespace of its own, keep the AdmissionReview it sent; remove both."""
    import watchkeeper as wk

    with tempfile.TemporaryDirectory(prefix="wk-whl-") as tmp_s:
        certs = make_certs(Path(tmp_s))
        tls = wk.webhooks.ServingTLS()
        tls.update(certs["cert"].read_bytes(), certs["key"].read_bytes())
        ca_bundle = certs["ca"].read_bytes()
    server = wk.webhooks.WebhookServer(tls, port=0)
    seen: list[dict[str, Any]] = []

    @server.validating("/record")
    async def keep(req: wk.webhooks.AdmissionRequest[Any]) -> None:
        seen.append({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": req.raw})

    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    async with wk.Client(wk.ClientConfig.from_kubeconfig(kubeconfig)) as client:
        namespaces = client.api("namespaces")
        vwcs = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
        await server.start()
        await namespaces.create({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": ns}})
        try:
            await vwcs.create({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": ns},
                "webhooks": [{
                    "name": "record.webhook-latency.example.com", "sideEffects": "None",
                    "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                    "clientConfig": {"url": server.url + "/record",
                                     "caBundle": base64.b64encode(ca_bundle).decode()},
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                               "operations": ["CREATE"], "resources": ["configmaps"]}],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                }]})
            api = client.api("configmaps", ns)
            async with asyncio.timeout(30):
                i = 0
                while not seen:  # the API server takes up a new configuration within ~1 s
                    await api.create(configmap_body(f"cm-{i}", ns, i))
                    i += 1
                    await asyncio.sleep(0.5)
        finally:
            with contextlib.suppress(wk.NotFound):
                await vwcs.delete(ns)
            with contextlib.suppress(wk.NotFound):
                await namespaces.delete(ns)
            await server.stop()
    return seen[0]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rates", default="200,1000", help="reviews a second, comma-separated")
    p.add_argument("--seconds", type=float, default=15.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds at the rate, not measured")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--servers", default="watchkeeper,watchkeeper-typed,kopf")
    p.add_argument("--record", metavar="KUBECONFIG",
                   help="record benchmarks/admission_review.json from this cluster")
    p.add_argument("--record-prefix", default="whb-rec",
                   help="--record's namespace name prefix")
    for hidden in ("--child", "--serve", "--url", "--ca", "--cert", "--key"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    for hidden in ("--rate",):
        p.add_argument(hidden, type=float, help=argparse.SUPPRESS)
    for hidden in ("--port", "--server-pid"):
        p.add_argument(hidden, type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        serve_main(a)
        return
    if a.child:
        child_main(a)
        return
    if a.record:
        review = asyncio.run(record(a.record, a.record_prefix))
        REVIEW.write_text(json.dumps(review, separators=(",", ":")) + "\n")  # as sent
        print(f"recorded {REVIEW}", file=sys.stderr)
        return
    servers = [s.strip() for s in a.servers.split(",") if s.strip()]
    unknown = set(servers) - set(SERVERS)
    if unknown:
        p.error(f"unknown servers {sorted(unknown)}; known: {', '.join(SERVERS)}")
    rates = [float(r) for r in a.rates.split(",") if r.strip()]
    t0 = time.time()
    data = run(rates, a.seconds, a.warmup, a.rounds, servers)
    data["elapsed_s"] = time.time() - t0
    path = save_results("webhook-latency", data)
    print(table(data))
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
