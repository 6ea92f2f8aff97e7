"""The simulator in a separate process, so its CPU is not spent inside a measured client.

    with SimProcess(history=110_000) as sim:
        sim.call("seed", namespace="list", count=10_000)
        run_child(..., "--kubeconfig", str(sim.kubeconfig))

``call`` sends one command to ``benchmarks._sim_runner`` (see its docstring) and returns
its JSON answer; an answer with ``"ok": false`` raises ``SimError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from benchmarks._common import PYTHON, ROOT


class SimError(RuntimeError):
    pass


class SimProcess:
    def __init__(
        self,
        *,
        history: int = 10_000,
        fast_replay: bool = False,
        port: int = 0,
        prefix: Sequence[str] = (),
    ) -> None:
        self.history = history
        self.fast_replay = fast_replay
        self.port = port
        self.prefix = list(prefix)
        self._tmp = tempfile.TemporaryDirectory(prefix="wk-sim-")
        self.kubeconfig = Path(self._tmp.name) / "admin.kubeconfig"
        self.proc: subprocess.Popen[str] | None = None
        self.pid = 0
        self.url = ""
        self.stderr_path = Path(self._tmp.name) / "sim.stderr"

    def start(self) -> None:
        cmd = [*self.prefix, PYTHON, "-m", "benchmarks._sim_runner", "--port", str(self.port),
               "--kubeconfig", str(self.kubeconfig), "--history", str(self.history)]
        if self.fast_replay:
            cmd.append("--fast-replay")
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True, bufsize=1, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        hello = self._read()
        if not hello.get("ready"):
            raise SimError(f"simulator did not start: {hello}")
        self.pid, self.url, self.port = int(hello["pid"]), hello["url"], int(hello["port"])

    def _read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SimError(f"simulator exited: {self.stderr_tail()}")
        result: dict[str, Any] = json.loads(line)
        return result

    def stderr_tail(self, n: int = 1500) -> str:
        try:
            return self.stderr_path.read_text()[-n:]
        except OSError:
            return ""

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if not reply.get("ok"):
            raise SimError(f"{op}: {reply.get('error')}")
        return reply

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._stderr.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._tmp.cleanup()
