"""run_simulator (the `watchkeeper sim` entry point), direct object helpers, client()."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from watchkeeper_sim import ApiServer, run_simulator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def simulator(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[int, Path]]:
    """``run_simulator`` in a task, until its kubeconfig is written: (port, kubeconfig)."""
    port = free_port()
    kc = tmp_path / "kubeconfig"
    task = asyncio.create_task(run_simulator("127.0.0.1", port, str(kc), **options))
    try:
        for _ in range(100):
            if kc.exists():
                break
            await asyncio.sleep(0.02)
        yield port, kc
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_run_simulator_serves_until_cancelled(tmp_path: Path) -> None:
    async with simulator(tmp_path, seed_objects=True) as (port, kc):
        doc = yaml.safe_load(kc.read_bytes())
        token = doc["users"][0]["user"]["token"]
        async with aiohttp.ClientSession() as s, s.get(
            f"http://127.0.0.1:{port}/api/v1/namespaces/default/configmaps",
            headers={"Authorization": f"Bearer {token}"},
        ) as r:
            body = await r.json()
            # the sample object, and the CA ConfigMap a cluster puts in every namespace
            assert [i["metadata"]["name"] for i in body["items"]] == [
                "demo-config", "kube-root-ca.crt"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_sim_over_tls_serves_kubectl(tmp_path: Path) -> None:
    """kubectl sends no bearer token over plain HTTP: `watchkeeper sim` serves TLS by default
    and its kubeconfig carries the CA, so kubectl authenticates as the admin."""
    async with simulator(tmp_path, tls=True) as (_, kc):
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(kc), "get", "configmaps", "-A", "-o", "name",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        names = out.decode().split()
        assert names.count("configmap/kube-root-ca.crt") == 3  # default, kube-system, -public
        assert "configmap/demo-config" in names


async def test_direct_object_helpers(apiserver: ApiServer) -> None:
    obj = apiserver.create_object({"apiVersion": "apps/v1", "kind": "Deployment",
                                   "metadata": {"name": "d", "namespace": "default"},
                                   "spec": {"replicas": 1}})
    assert obj["metadata"]["generation"] == 1
    got = apiserver.get_object("apps/v1", "deployments", "d")
    assert got["kind"] == "Deployment"
    got["spec"]["replicas"] = 2
    assert apiserver.update_object(got)["metadata"]["generation"] == 2
    got = apiserver.get_object("apps/v1", "Deployment", "d")
    got["status"] = {"readyReplicas": 2}
    assert apiserver.update_object(got, subresource="status")["status"] == {"readyReplicas": 2}
    assert apiserver.delete_object("apps/v1", "Deployment", "d")["status"] == "Success"


def test_client_config_carries_the_token() -> None:
    srv = ApiServer()
    cfg = srv.client_config("limited")
    assert cfg.server == srv.url and cfg.ca_data is None
    headers = asyncio.run(cfg.auth.headers())
    assert headers == {"Authorization": f"Bearer {srv.token('limited')}"}
