"""Two controllers in one process and SIGTERM (issue 12): one signal drains both of them
concurrently, a second one forces both; whether they run under ``watchkeeper.run`` or as
two ``Controller.run`` in one ``asyncio.gather``. Before, only the controller started last
got the signal: the other kept running, and the process never exited."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from watchkeeper_sim import ApiServer

APP = Path(__file__).with_name("two_controllers_app.py")
pytestmark = pytest.mark.realtime


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for(what: str, check: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def start_two(
    srv: ApiServer, tmp_path: Path, mode: str, slow: float
) -> tuple[asyncio.subprocess.Process, Path]:
    srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "two"}})
    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "cm", "namespace": "two"}, "data": {"k": "v"}})
    srv.create_object({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "sec", "namespace": "two"}, "data": {}})
    kubeconfig = srv.kubeconfig(tmp_path / "kubeconfig")
    log = tmp_path / "reconciles.jsonl"
    if mode == "cli":  # `watchkeeper run app.py:setup`, setup returning both operators
        args = ["-m", "watchkeeper.cli", "run", f"{APP}:setup", "--kubeconfig", kubeconfig,
                "--probe-port", "-1"]
    else:
        args = [str(APP), mode, kubeconfig, str(log), str(slow)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "WK_TEST_RECONCILE_LOG": str(log), "WK_TEST_SLOW": str(slow)},
    )
    # Both reconciles in flight before the signal.
    def started() -> bool:
        if proc.returncode is not None:
            return True
        return {e["kind"] for e in read_log(log) if e.get("event") == "start"} == {
            "configmap", "secret"}

    await wait_for("both reconciles to start", started)
    if proc.returncode is not None:
        pytest.fail(f"exited with {proc.returncode} before reconciling: {await stop(proc)}")
    return proc, log


async def stop(proc: asyncio.subprocess.Process) -> str:
    """The process's log once it ended (killed if it had not)."""
    if proc.returncode is None:
        proc.kill()
    await proc.wait()
    return (await proc.stderr.read()).decode() if proc.stderr else ""


@pytest.mark.parametrize("mode", ["runtime", "standalone", "cli"])
async def test_one_sigterm_drains_both_controllers(tmp_path: Path, mode: str) -> None:
    slow = 2.0
    async with ApiServer() as srv:
        proc, log = await start_two(srv, tmp_path, mode, slow)
        try:
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                pytest.fail(f"still running 15 s after SIGTERM; log: {read_log(log)}\n"
                            f"{await stop(proc)}")
            took = time.monotonic() - signalled
            stderr = await stop(proc)
            assert proc.returncode == 0, stderr
            entries = read_log(log)
            ends = {e["kind"]: e["event"] for e in entries if e.get("event") in ("done",
                                                                                 "cancelled")}
            assert ends == {"configmap": "done", "secret": "done"}, entries
            assert mode == "cli" or entries[-1]["event"] == "exit"
            assert stderr.count("stopping: waiting for 1 reconciles to finish") == 2, stderr
            assert "cancelling" not in stderr, stderr
            # Drained concurrently: both within one slow reconcile, not one after the other.
            assert took < slow + 1.5, took
        finally:
            await stop(proc)


@pytest.mark.parametrize("mode", ["runtime", "standalone", "cli"])
async def test_a_second_sigterm_forces_both_controllers(tmp_path: Path, mode: str) -> None:
    async with ApiServer() as srv:
        proc, log = await start_two(srv, tmp_path, mode, 120.0)
        try:
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)  # both are draining now (their reconciles take 120 s)
            assert proc.returncode is None
            forced = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                pytest.fail(f"still running 10 s after the second SIGTERM; "
                            f"log: {read_log(log)}\n{await stop(proc)}")
            assert time.monotonic() - forced < 5
            stderr = await stop(proc)
            assert proc.returncode == 0, stderr
            entries = read_log(log)
            ends = {e["kind"]: e["event"] for e in entries if e.get("event") in ("done",
                                                                                 "cancelled")}
            assert ends == {"configmap": "cancelled", "secret": "cancelled"}, entries
            assert "second signal: stopping at once" in stderr, stderr
            assert stderr.count("stopping: cancelling 1 unfinished reconciles") == 2, stderr
        finally:
            await stop(proc)
