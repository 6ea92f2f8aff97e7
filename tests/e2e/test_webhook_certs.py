"""Webhook certificates on a real cluster: two replicas agree, caBundle reaches a webhook
configuration (the simulator serves no admissionregistration.k8s.io)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import watchkeeper as wk
from e2e.conftest import LABELS
from e2e.webhook_crds import conversion_crd
from watchkeeper.webhooks import CertificateManager, WebhookCerts, pki


def _webhook(name: str, namespace: str) -> dict[str, Any]:
    # a rule on a group nobody serves, in this namespace only: it never sees a request
    return {
        "name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "failurePolicy": "Ignore", "timeoutSeconds": 1,
        "clientConfig": {"service": {"namespace": namespace, "name": "hooks",
                                     "path": "/validate", "port": 443}},
        "rules": [{"apiGroups": ["certs.example.com"], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["nothings"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    }


async def test_two_replicas_agree_and_the_bundle_reaches_a_validating_webhook(
    client: wk.Client, namespace: str
) -> None:
    vwcs = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
    name = f"{namespace}-hooks"
    await vwcs.create({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "webhooks": [_webhook("a.certs.example.com", namespace),
                     _webhook("b.certs.example.com", namespace)],
    })
    try:
        config = WebhookCerts("hooks", namespace, validating=(name,))
        managers = [CertificateManager(client, config) for _ in range(2)]
        states = await asyncio.gather(*(m.ensure() for m in managers))
        assert states[0].serving.cert_pem == states[1].serving.cert_pem
        secret = await client.api("secrets", namespace).get("hooks-tls")
        assert secret["type"] == "kubernetes.io/tls"
        assert base64.b64decode(secret["data"]["tls.crt"]) == states[0].serving.cert_pem
        assert pki.info(states[0].serving.cert_pem).hosts == {
            "hooks", f"hooks.{namespace}", f"hooks.{namespace}.svc",
            f"hooks.{namespace}.svc.cluster.local"}

        changed = await asyncio.gather(*(m.publish() for m in managers))
        assert sorted(changed) in ([0, 1], [1, 1])  # at most both wrote the same value
        vwc = await vwcs.get(name)
        for hook in vwc["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == managers[0].ca_bundle
            assert hook["clientConfig"]["service"]["path"] == "/validate"
        rv = vwc["metadata"]["resourceVersion"]
        assert await managers[0].publish() == 0
        assert (await vwcs.get(name))["metadata"]["resourceVersion"] == rv
    finally:
        with contextlib.suppress(wk.NotFound):
            await vwcs.delete(name)


async def test_the_bundle_reaches_a_crds_conversion_webhook(
    client: wk.Client, namespace: str
) -> None:
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    group = f"{namespace}.example.com"  # the namespace's name starts with the prefix
    name = f"gadgets.{group}"
    await crds.create(conversion_crd(
        group, "Gadget", "gadgets", {v: {"openAPIV3Schema": {"type": "object"}}
                                     for v in ("v1", "v2")}, "v1",
        {"service": {"namespace": namespace, "name": "hooks", "path": "/convert",
                     "port": 443}}))
    try:
        mgr = CertificateManager(client, WebhookCerts("hooks", namespace, crds=(name,)))
        await mgr.sync()
        crd = await crds.get(name)
        got = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert base64.b64decode(got["caBundle"]) == mgr.ca_bundle
        assert got["service"]["path"] == "/convert"
        assert await mgr.publish() == 0
    finally:
        with contextlib.suppress(wk.NotFound):
            await crds.delete(name)
