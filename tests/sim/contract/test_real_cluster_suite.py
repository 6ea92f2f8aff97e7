"""The real-cluster suite (tests/e2e) run against the simulator, as ``make e2e`` runs it
against a cluster: the same kubeconfig path (TLS, a bearer token), in its own pytest
process. ``make test`` skips tests/e2e without a cluster, so an API change that breaks the
suite would otherwise be found only when someone runs it against a real API server; here
it fails first, and the simulator keeps answering what that suite expects of a cluster."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from watchkeeper_sim import ApiServer

pytestmark = [pytest.mark.realtime, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]


async def test_the_real_cluster_suite_passes_against_the_simulator(tmp_path: Path) -> None:
    # The options `watchkeeper-sim sim` serves with (server.run_simulator), TLS on.
    async with ApiServer(tls=True, root_ca_configmaps=True,
                         initial_events_end_delay=1.0) as srv:
        kubeconfig = tmp_path / "kubeconfig"
        srv.kubeconfig(kubeconfig)
        env = {**os.environ, "WATCHKEEPER_E2E_KUBECONFIG": str(kubeconfig),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "sim")])}
        env.pop("WATCHKEEPER_E2E_CONTEXT", None)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pytest", "-q", "-m", "e2e", "-p", "no:cacheprovider",
            str(ROOT / "tests" / "e2e"), cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    tail = "\n".join(text.splitlines()[-40:])
    assert proc.returncode == 0, tail
    assert " passed" in tail and "skipped" not in tail and "deselected" not in tail, tail
