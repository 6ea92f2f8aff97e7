"""The webhook server on a real kube-apiserver: webhook configurations and a CRD whose
clientConfig is a ``url:`` on this machine (https://127.0.0.1:<port>, the serving cert has
127.0.0.1 with ``local_hosts``), the caBundle published by the CertificateManager.

``kubectl apply`` of an invalid object is denied with the handler's message, a warning
reaches kubectl, a server-side dry run reaches the handler as one; a mutating handler's
patch is applied by the API server; a CRD's objects are converted by ``wk.convert`` when
read at another version. Needs an API server that can reach 127.0.0.1 (the server runs
on the machine of the tests, as kube-apiserver in /tmp/realk8s does).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from e2e.conftest import (
    CONTEXT,
    KUBECONFIG,
    LABELS,
)
from e2e.webhook_crds import ANY_SPEC, ReplicasSpec, SizeSpec, conversion_crd, size_and_replicas
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    Denied,
    WebhookCerts,
    WebhookServer,
)


def kubectl(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KUBECONFIG
    cmd = ["kubectl", "--kubeconfig", KUBECONFIG, *(["--context", CONTEXT] if CONTEXT else []),
           *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KUBECONFIG": KUBECONFIG})


def _hook(name: str, url: str, namespace: str, resource: str, group: str = "") -> dict[str, Any]:
    return {
        "name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail", "timeoutSeconds": 5, "clientConfig": {"url": url},
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"],
                   "operations": ["CREATE", "UPDATE"], "resources": [resource]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    }


class Served:
    def __init__(self, server: WebhookServer, mgr: CertificateManager) -> None:
        self.server, self.mgr = server, mgr
        self.seen: list[tuple[str, bool]] = []


@pytest.fixture
async def served(client: wk.Client, namespace: str) -> AsyncIterator[Served]:
    name = f"{namespace}-hooks"
    mgr = CertificateManager(client, WebhookCerts(
        "hooks", namespace, local_hosts=True, validating=(name,), mutating=(name,)))
    server = WebhookServer(mgr, port=0)
    s = Served(server, mgr)

    @server.validating("/validate-cm", model=wk.k8s.ConfigMap)
    async def validate(req: AdmissionRequest[wk.k8s.ConfigMap]) -> None:
        assert req.object is not None
        s.seen.append((req.object.metadata.name or "", req.dry_run))
        mode = (req.object.data or {}).get("mode")
        if mode == "old":
            req.warn("mode old is deprecated")
        if mode not in ("fast", "slow", "old"):
            raise Denied(f"data.mode must be fast, slow or old, not {mode!r}")

    @server.mutating("/mutate-cm")
    async def mutate(req: AdmissionRequest[Any]) -> dict[str, Any]:
        obj = dict(req.object or {})
        meta = dict(obj["metadata"])
        meta["labels"] = {**(meta.get("labels") or {}), "stamped-by": "watchkeeper"}
        return {**obj, "metadata": meta}

    await server.start()
    base = server.url
    hooks_api = {
        kind: client.api(f"{kind.lower()}webhookconfigurations.admissionregistration.k8s.io",
                         None)
        for kind in ("Validating", "Mutating")}
    for kind, path in (("Validating", "/validate-cm"), ("Mutating", "/mutate-cm")):
        await hooks_api[kind].create({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": name, "labels": dict(LABELS)},
            "webhooks": [_hook(f"{kind.lower()}.whk.example.com", base + path, namespace,
                               "configmaps")]})
    try:
        await mgr.publish()
        yield s
    finally:
        for api in hooks_api.values():
            with contextlib.suppress(wk.NotFound):
                await api.delete(name)
        await server.stop()


def configmap(name: str, mode: str) -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
            f"data:\n  mode: {mode}\n")


async def until_webhooks_apply(namespace: str) -> None:
    """The API server picks up a new webhook configuration within about a second."""
    async with asyncio.timeout(30):
        while True:
            out = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "--dry-run=server",
                                          "-f", "-", stdin=configmap("probe", "warp"))
            if out.returncode != 0:
                return
            await asyncio.sleep(0.5)


async def test_kubectl_sees_denials_warnings_and_dry_runs_and_mutations_are_stored(
    served: Served, client: wk.Client, namespace: str,
) -> None:
    await until_webhooks_apply(namespace)
    denied = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "-f", "-",
                                     stdin=configmap("bad", "warp"))
    assert denied.returncode != 0
    assert "denied the request: data.mode must be fast, slow or old, not 'warp'" in denied.stderr

    warned = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "-f", "-",
                                     stdin=configmap("legacy", "old"))
    assert warned.returncode == 0, warned.stderr
    assert "Warning: mode old is deprecated" in warned.stderr

    served.seen.clear()
    dry = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "--dry-run=server",
                                  "-f", "-", stdin=configmap("dry", "fast"))
    assert dry.returncode == 0, dry.stderr
    assert served.seen == [("dry", True)]
    with pytest.raises(wk.NotFound):
        await client.api("configmaps", namespace).get("dry")

    stored = await client.api("configmaps", namespace).get("legacy")
    assert stored["metadata"]["labels"] == {"stamped-by": "watchkeeper"}  # the mutation
    assert stored["data"] == {"mode": "old"}


async def test_a_crds_objects_are_converted_by_the_webhook_when_read_at_another_version(
    client: wk.Client, namespace: str,
) -> None:
    group = f"{namespace}.example.com"
    GadgetV1, GadgetV2 = size_and_replicas(group, "Gadget")
    name = f"gadgets.{group}"
    mgr = CertificateManager(client, WebhookCerts("hooks", namespace, local_hosts=True,
                                                  crds=(name,)))
    server = WebhookServer(mgr, port=0)
    server.conversion("/convert-gadgets", GadgetV1, GadgetV2)
    await server.start()
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    await crds.create(conversion_crd(group, "Gadget", "gadgets",
                                     {"v1": ANY_SPEC, "v2": ANY_SPEC}, "v1",
                                     {"url": server.url + "/convert-gadgets"}))
    try:
        await mgr.publish()
        async with asyncio.timeout(60):  # until the CRD is served
            while True:
                with contextlib.suppress(wk.NotFound):
                    await client.api(GadgetV1, namespace).list()
                    break
                await asyncio.sleep(0.5)
        v1 = client.api(GadgetV1, namespace)
        v2 = client.api(GadgetV2, namespace)
        await v1.create(GadgetV1(metadata=wk.ObjectMeta(name="g"), spec=SizeSpec(size=3)))
        got = await v2.get("g")
        assert isinstance(got, GadgetV2) and got.spec == ReplicasSpec(replicas=3)
        written = await v2.create(GadgetV2(metadata=wk.ObjectMeta(name="h"),
                                           spec=ReplicasSpec(replicas=5)))
        assert written.spec.replicas == 5  # converted to v1 for storage and back
        assert (await v1.get("h")).spec == SizeSpec(size=5)
        stats = server.conversions["/convert-gadgets"].stats
        assert stats.requests >= 3 and stats.errors == 0
    finally:
        with contextlib.suppress(wk.NotFound):
            await crds.delete(name)
        await server.stop()
