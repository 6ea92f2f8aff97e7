"""Real-cluster tests: run with WATCHKEEPER_E2E_KUBECONFIG=path make e2e; skipped otherwise.

Each test works in a fresh namespace it deletes afterwards; the kubeconfig's user needs
rights to create namespaces, CRDs, service accounts, roles and role bindings."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import pytest

import watchkeeper as wk

KUBECONFIG = os.environ.get("WATCHKEEPER_E2E_KUBECONFIG")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            if not KUBECONFIG:
                item.add_marker(pytest.mark.skip(reason="set WATCHKEEPER_E2E_KUBECONFIG"))


@pytest.fixture
async def client() -> AsyncIterator[wk.Client]:
    assert KUBECONFIG
    async with await wk.Client.from_env(KUBECONFIG) as c:
        yield c


@pytest.fixture
async def namespace(client: wk.Client) -> AsyncIterator[str]:
    name = f"wk-e2e-{uuid.uuid4().hex[:8]}"
    namespaces = client.api("namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": name}})
    yield name
    with contextlib.suppress(wk.NotFound):
        await namespaces.delete(name)
