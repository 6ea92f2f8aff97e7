"""Shared helpers: measuring a child process, running children, objects, tables, versions.

Every measured client runs in its own child process (``python -m benchmarks.<module>
--child ...``) so that its imports, CPU time and peak memory are its own. A child prints
exactly one result line, ``@@RESULT {json}``, which ``run_child`` returns as a dict.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
PYTHON = sys.executable
RESULT_TAG = "@@RESULT "

PEER_PACKAGES = ("kubernetes", "kubernetes_asyncio", "lightkube", "kr8s", "kopf")
OTHER_PACKAGES = (
    "watchkeeper", "aiohttp", "msgspec", "httpx", "httpx2", "urllib3", "lightkube-models",
)


# -- measuring inside a child ---------------------------------------------------------------


def _status_kb(key: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kb() -> int:
    """The current resident set size of this process, in KiB (0 if unknown)."""
    return _status_kb("VmRSS:")


def peak_rss_kb() -> int:
    """The peak resident set size of this process so far, in KiB.

    VmHWM, not ``getrusage().ru_maxrss``: Linux carries ru_maxrss across fork + exec, so a
    child would report its parent's size when that was larger."""
    return _status_kb("VmHWM:") or int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


@dataclass
class Meter:
    """Wall clock and CPU time (all threads of this process) from ``start()`` to ``stop()``,
    and the CPU time the simulator (``server_pid``) used meanwhile."""

    server_pid: int = 0
    wall0: float = 0.0
    cpu0: float = 0.0
    server0: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    server_cpu: float = float("nan")

    def start(self) -> Meter:
        if self.server_pid:
            self.server0 = server_cpu_seconds(self.server_pid)
        _callgrind("on")
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0
        _callgrind("off")
        if self.server_pid:
            self.server_cpu = server_cpu_seconds(self.server_pid) - self.server0
        return self


def _callgrind(state: str) -> None:
    """Under ``benchmarks.watch_instructions`` (valgrind's callgrind, started with its
    instrumentation off): count instructions only between ``start`` and ``stop``."""
    if os.environ.get("WK_BENCH_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())],
                       capture_output=True, check=True)


@dataclass
class ChildReport:
    """What a child sends back; ``extra`` holds benchmark-specific numbers."""

    client: str
    ok: bool = True
    error: str | None = None
    rss_base_kb: int = 0  # after imports, before any work
    extra: dict[str, Any] = field(default_factory=dict)

    def emit(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        data = {
            "client": self.client,
            "ok": self.ok,
            "error": self.error,
            "rss_base_kb": self.rss_base_kb,
            "rss_peak_kb": peak_rss_kb(),
            "process_cpu_s": usage.ru_utime + usage.ru_stime,
            **self.extra,
        }
        sys.stdout.write(RESULT_TAG + json.dumps(data) + "\n")
        sys.stdout.flush()


def server_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds used so far by process ``pid`` (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def machine_busy_seconds() -> float:
    """CPU seconds spent busy so far by every process on the machine (from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait: float | None = None, max_cores: float = 0.3) -> float:
    """Wait (at most ``max_wait`` s, default $WK_BENCH_QUIET_WAIT or 30) until other
    processes use less than ``max_cores`` CPUs over a 1-second sample: other engineers' test
    runs may share this machine. Returns the last sample (CPUs busy)."""
    if max_wait is None:
        max_wait = float(os.environ.get("WK_BENCH_QUIET_WAIT", "30"))
    end = time.monotonic() + max_wait
    announced = False
    while True:
        b0 = machine_busy_seconds()
        time.sleep(1.0)
        busy = machine_busy_seconds() - b0
        if busy < max_cores or time.monotonic() >= end:
            return busy
        if not announced:
            print(f"# waiting for a quiet machine ({busy:.1f} CPUs busy elsewhere)",
                  file=sys.stderr)
            announced = True


# -- running children -----------------------------------------------------------------------


def run_child(
    module: str,
    args: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
    server_pid: int = 0,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run ``python -m benchmarks.<module> <args>`` and return its ``@@RESULT`` dict.

    A child that fails, hangs past ``timeout`` or prints no result gives
    ``{"ok": False, "error": ...}`` with the tail of its stderr, never an exception. With
    ``quiet``, waits for a quiet machine first; the result gets ``other_load``: the CPUs
    that processes other than the child and the simulator (``server_pid``) kept busy
    meanwhile (0 on an otherwise idle machine).
    """
    if quiet:
        wait_for_quiet()
    cmd = [*prefix, PYTHON, "-m", f"benchmarks.{module}", *args]
    full_env = {**os.environ, **(env or {})}
    busy0, server0, t0 = machine_busy_seconds(), _server_cpu(server_pid), time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        tail = _tail(exc.stderr)
        return {"ok": False, "error": f"timed out after {timeout:.0f} s; stderr: {tail}"}
    elapsed = time.monotonic() - t0
    busy = machine_busy_seconds() - busy0
    server = _server_cpu(server_pid) - server0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            result: dict[str, Any] = json.loads(line[len(RESULT_TAG):])
            if proc.returncode != 0 and result.get("ok", True):
                result["ok"] = False
                result["error"] = f"exit status {proc.returncode}: {_tail(proc.stderr)}"
            own = float(result.get("process_cpu_s") or 0.0) + server
            result["child_elapsed_s"] = elapsed
            result["other_load"] = max(0.0, (busy - own) / elapsed) if elapsed > 0 else 0.0
            return result
    return {
        "ok": False,
        "error": f"no result (exit status {proc.returncode}); stderr: {_tail(proc.stderr)}",
    }


def _server_cpu(pid: int) -> float:
    return server_cpu_seconds(pid) if pid else 0.0


def _tail(text: str | bytes | None, n: int = 600) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text.strip()[-n:]


# -- the objects ----------------------------------------------------------------------------

PAYLOAD_BYTES = 600


def configmap_body(
    name: str, namespace: str, i: int, payload_bytes: int = PAYLOAD_BYTES
) -> dict[str, Any]:
    """A ConfigMap like a real one: two labels and a ``payload_bytes`` data value.

    The server adds uid, timestamps, resourceVersion and a managedFields entry: with the
    default 600-byte payload that is ~1.1 KB of JSON per object (~1.2 KB per watch line).
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "bench", "tier": "backend"},
        },
        "data": {"payload": payload(i, 0, payload_bytes)},
    }


def payload(i: int, generation: int, payload_bytes: int = PAYLOAD_BYTES) -> str:
    """Deterministic text of ``payload_bytes`` characters that changes with ``generation``."""
    seed = f"cm-{i:06d}-gen-{generation:06d}:"
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    body = "".join(alphabet[(i * 7 + generation * 13 + k * k) % 36] for k in range(64))
    return (seed + body * (payload_bytes // 64 + 1))[:payload_bytes]


# -- reporting ------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def fmt_num(x: Any, digits: int = 0) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and x != x:  # NaN
        return "—"
    if isinstance(x, int | float):
        return f"{x:,.{digits}f}"
    return str(x)


def fmt_mib(kb: Any) -> str:
    if not isinstance(kb, int | float) or kb <= 0:
        return "—"
    return f"{kb / 1024:,.0f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; numbers right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def numeric(i: int) -> bool:
        vals = [r[i] for r in cells if r[i] not in ("—", "")]
        return bool(vals) and all(
            v.replace(",", "").replace(".", "").replace("x", "").replace("%", "").lstrip("-")
            .isdigit() for v in vals
        )

    aligns = [numeric(i) for i in range(len(headers))]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("|" + "|".join(
        ("-" * (w + 1) + ":") if a else ("-" * (w + 2)) for w, a in zip(widths, aligns, strict=True)
    ) + "|")
    for r in cells:
        out.append("| " + " | ".join(
            (c.rjust(w) if a else c.ljust(w)) for c, w, a in zip(r, widths, aligns, strict=True)
        ) + " |")
    return "\n".join(out)


def versions() -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version()}
    for name in (*OTHER_PACKAGES, *PEER_PACKAGES):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(mem_gib, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def save_results(name: str, data: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>-<timestamp>.json`` and ``<name>-latest.json``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    payload_ = {
        "benchmark": name,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions(),
        **data,
    }
    text = json.dumps(payload_, indent=2, sort_keys=False)
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    path.write_text(text)
    (RESULTS_DIR / f"{name}-latest.json").write_text(text)
    return path
