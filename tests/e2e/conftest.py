"""Real-cluster tests: run with WATCHKEEPER_E2E_KUBECONFIG=path make e2e; skipped otherwise.

WATCHKEEPER_E2E_KUBECONFIG may name several files, ':'-separated like KUBECONFIG, and
WATCHKEEPER_E2E_CONTEXT picks a context other than the files' current-context (as
``kubectl --context``); WATCHKEEPER_E2E_PREFIX replaces the ``wk-e2e`` of the namespaces'
names (on a cluster shared with others, each in their own namespaces). The user needs
rights to create namespaces, CRDs, service accounts and their tokens, roles, role bindings
and leases (cluster-admin on a kind cluster).

Each test works in a fresh namespace (``wk-e2e-<random>``) that it deletes afterwards without
waiting: a namespace takes seconds to terminate on a cluster (reference 171: 5.3 s) and no
later test reuses its name. Everything the suite creates at cluster scope carries the label
``watchkeeper.dev/e2e=yes``; after a run that was killed hard,
``kubectl delete ns,crd -l watchkeeper.dev/e2e=yes`` removes what it left behind.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import pytest

import watchkeeper as wk
from watchkeeper.client.config import load_kubeconfig

KUBECONFIG = os.environ.get("WATCHKEEPER_E2E_KUBECONFIG")
CONTEXT = os.environ.get("WATCHKEEPER_E2E_CONTEXT") or None
PREFIX = os.environ.get("WATCHKEEPER_E2E_PREFIX") or "wk-e2e"
LABELS = {"watchkeeper.dev/e2e": "yes"}
# pytest-timeout's thread method ends the whole run without running any finally block or
# fixture teardown, so an e2e test gets far longer than its own waits (at most a few minutes
# on a slow cluster): its asyncio timeouts fire first and its cleanup still runs.
TEST_TIMEOUT = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))
            if not KUBECONFIG:
                item.add_marker(pytest.mark.skip(reason="set WATCHKEEPER_E2E_KUBECONFIG"))


@pytest.fixture
async def client() -> AsyncIterator[wk.Client]:
    assert KUBECONFIG
    config = load_kubeconfig([p for p in KUBECONFIG.split(os.pathsep) if p], CONTEXT)
    async with wk.Client(config) as c:
        yield c


@pytest.fixture
async def namespace(client: wk.Client) -> AsyncIterator[str]:
    name = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    namespaces = client.api("namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": name, "labels": dict(LABELS)}})
    try:
        yield name
    finally:
        with contextlib.suppress(wk.NotFound):
            await namespaces.delete(name)


async def on_simulator(client: wk.Client) -> bool:
    """True against watchkeeper's simulator (it answers its admin endpoint, a cluster 404s):
    tests/sim/contract runs this suite against it, and a test steps around (or expects to
    fail on) a gap the simulator's own tests and docs name."""
    try:
        await client.transport.request("GET", "/_sim/faults")
    except wk.NotFound:
        return False
    return True
