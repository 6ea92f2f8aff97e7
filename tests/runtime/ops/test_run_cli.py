"""`watchkeeper run` with the example operator: probes, work, `status`, clean SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.realtime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_run_serves_probes_works_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    import widget_operator  # the example's CRD

    async with ApiServer() as srv:
        srv.create_object(widget_operator.CRD)
        kubeconfig = srv.kubeconfig(tmp_path / "kubeconfig")
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "run",
            f"{ROOT / 'examples' / 'widget_operator.py'}:setup",
            "--kubeconfig", kubeconfig, "--probe-host", "127.0.0.1", "--probe-port", str(port),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:
                async with asyncio.timeout(20):
                    while True:
                        try:
                            async with http.get(url + "/readyz") as resp:
                                if resp.status == 200:
                                    break
                        except aiohttp.ClientConnectionError:
                            pass
                        await asyncio.sleep(0.1)
                async with http.get(url + "/metrics") as resp:
                    assert "watchkeeper_watch_state" in await resp.text()
            srv.create_object({"apiVersion": "example.com/v1", "kind": "Widget",
                               "metadata": {"name": "w", "namespace": "default"},
                               "spec": {"data": {"k": "v"}}})
            rt = srv.resource("v1", "ConfigMap")
            async with asyncio.timeout(20):
                while srv.store.peek(rt, "default", "widget-w") is None:
                    await asyncio.sleep(0.1)

            status = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "watchkeeper.cli", "status", url,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await status.communicate()
            assert status.returncode == 0, out
            assert b"widgets.example.com" in out and b"healthy" in out

            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)  # the default drain timeout
            log = (await proc.stdout.read()).decode() if proc.stdout else ""
            assert proc.returncode == 0, log
            assert time.monotonic() - stopped < 5
            async with asyncio.timeout(3):  # the server notices closed streams within 0.5 s
                while srv.open_watches:
                    await asyncio.sleep(0.05)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
