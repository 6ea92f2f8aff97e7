"""The first minute with the simulator: the real `watchkeeper sim` in a child process says
where it listens, which kubeconfig it wrote (or the flag that writes one) and how to stop
it; kubectl works with that kubeconfig; stopping it the printed way exits 0."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realtime

WATCHKEEPER = Path(sys.executable).parent / "watchkeeper"  # the installed console script


async def start(*args: str) -> asyncio.subprocess.Process:
    assert WATCHKEEPER.exists(), f"{WATCHKEEPER} is not installed: run make .venv/.installed-test"
    return await asyncio.create_subprocess_exec(
        str(WATCHKEEPER), "sim", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "KUBECONFIG": "/nonexistent"})


async def announcement(proc: asyncio.subprocess.Process) -> list[str]:
    """The lines it prints until it says how to stop it."""
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while not lines or "Stop it with" not in lines[-1]:
            line = await proc.stdout.readline()
            if not line:
                assert proc.stderr is not None
                pytest.fail(f"it stopped printing: {lines}; stderr: "
                            f"{(await proc.stderr.read()).decode()}")
            lines.append(line.decode().rstrip("\n"))
    return lines


async def stop_as_printed(proc: asyncio.subprocess.Process, lines: list[str], sig: int
                          ) -> tuple[int, str, str]:
    """Send what the last line says (kill -INT PID; Ctrl-C is the same SIGINT), or ``sig``."""
    said = re.search(r"kill -INT (\d+)", lines[-1])
    assert said is not None and int(said.group(1)) == proc.pid, lines[-1]
    proc.send_signal(sig)
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_sim_prints_its_address_kubeconfig_and_how_to_stop(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    proc = await start("--port", "0", "--kubeconfig-out", str(kubeconfig))
    try:
        lines = await announcement(proc)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    text = "\n".join(lines)
    url = re.search(r"serving at (https://127\.0\.0\.1:(\d+))$", lines[0])
    assert url is not None, text
    chosen = re.search(r"--port 0 chose port (\d+)", text)
    assert chosen is not None and chosen.group(1) == url.group(2) != "0", text
    written = re.search(r"^kubeconfig \(.*\): (.+)$", text, re.M)
    assert written is not None and Path(written.group(1)) == kubeconfig, text
    assert f"kubectl --kubeconfig {kubeconfig} get namespaces" in text

    kubectl = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", written.group(1), "get", "namespaces,configmaps", "-A",
        "-o", "name", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(kubectl.communicate(), 60)
    assert kubectl.returncode == 0, err.decode()
    assert {"namespace/default", "configmap/demo-config"} <= set(out.decode().split())

    code, rest, err = await stop_as_printed(proc, lines, signal.SIGINT)
    assert code == 0, err
    assert rest.strip() == "Stopped." and "Traceback" not in err, (rest, err)


async def test_sim_without_a_kubeconfig_names_the_flag_and_stops_on_sigterm() -> None:
    proc = await start("--port", "0", "--empty")
    try:
        lines = await announcement(proc)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    text = "\n".join(lines)
    port = re.search(r"chose port (\d+)", text)
    assert port is not None, text
    assert "No kubeconfig written" in text and "--kubeconfig-out FILE" in text, text
    assert "watchkeeper sim --port 0 --kubeconfig-out sim.kubeconfig" in text, text
    code, rest, err = await stop_as_printed(proc, lines, signal.SIGTERM)
    assert code == 0 and rest.strip() == "Stopped.", (code, rest, err)
