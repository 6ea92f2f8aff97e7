"""`watchkeeper watch` prints events like kubectl get -w and its state on stderr."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from watchkeeper.testing import ApiServer

pytestmark = pytest.mark.realtime


async def test_watch_prints_events_and_a_status_line_through_an_outage(tmp_path: Path) -> None:
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "first", "namespace": "default"}})
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "watch", "configmaps", "-n", "default",
            "--kubeconfig", kubeconfig,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            async with asyncio.timeout(10):
                line = await proc.stdout.readline()
            assert line.startswith(b"EXISTING") and b"default/first" in line
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "second", "namespace": "default"}})
            async with asyncio.timeout(10):
                line = await proc.stdout.readline()
            assert line.startswith(b"APPLIED") and b"default/second" in line
            async with asyncio.timeout(10):
                while not srv.open_watches:
                    await asyncio.sleep(0.05)
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            status = b""
            async with asyncio.timeout(10):
                while b"next try in" not in status:
                    status += await proc.stderr.readline()
            assert b"[degraded] ConnectionFailed" in status
            srv.faults.clear()
            srv.delete_object("v1", "ConfigMap", "first")
            async with asyncio.timeout(20):
                line = await proc.stdout.readline()
            assert line.startswith(b"DELETED") and b"default/first" in line
        finally:
            proc.terminate()
            await proc.wait()


def test_watch_rejects_namespace_with_all_namespaces() -> None:
    from click.testing import CliRunner

    from watchkeeper.cli import main

    result = CliRunner().invoke(main, ["watch", "configmaps", "-n", "x", "-A"])
    assert result.exit_code == 2 and "either --namespace or --all-namespaces" in result.output
