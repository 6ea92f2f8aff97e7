"""A write refused because of an admission webhook, on a real kube-apiserver: the client's
error names the webhook. A denial keeps the class of the webhook's code (``Invalid`` for
422) with ``error.webhook`` set; a webhook that cannot be called (its server stopped, its
failurePolicy Fail) is a ``WebhookFailed`` (a ``ServerError``, 500) naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

import watchkeeper as wk
from e2e.conftest import LABELS
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    Denied,
    WebhookCerts,
    WebhookServer,
)

HOOK = "guard.errors.example.com"


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def test_a_denial_and_an_unreachable_webhook_are_errors_naming_the_webhook(
    client: wk.Client, namespace: str,
) -> None:
    name = f"{namespace}-errors"
    mgr = CertificateManager(client, WebhookCerts("hooks", namespace, local_hosts=True,
                                                  validating=(name,)))
    server = WebhookServer(mgr, port=0)

    @server.validating("/deny")
    async def deny(req: AdmissionRequest[Any]) -> None:
        raise Denied("configmaps are read-only here", code=422)

    await server.start()
    hooks = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
    await hooks.create({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "webhooks": [{
            "name": HOOK, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"url": server.url + "/deny"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }]})
    cms = client.api("configmaps", namespace)
    try:
        await mgr.publish()
        async with asyncio.timeout(30):  # until the API server calls the webhook
            while True:
                try:
                    await cms.create(configmap("probe"), dry_run=True)
                except wk.Invalid as exc:
                    denied = exc
                    break
                await asyncio.sleep(0.5)
        assert denied.webhook == HOOK and denied.code == 422
        assert f'admission webhook "{HOOK}" denied the request' in str(denied)
        assert "configmaps are read-only here" in denied.message

        await server.stop()  # its port now refuses connections
        with pytest.raises(wk.WebhookFailed) as failed:
            await cms.create(configmap("down"))
        err = failed.value
        assert isinstance(err, wk.ServerError) and err.is_transient
        assert err.webhook == HOOK and err.code == 500 and err.reason == "InternalError"
        assert f'failed calling webhook "{HOOK}"' in err.message
        assert f'"{HOOK}" could not be called' in str(err)
    finally:
        with contextlib.suppress(wk.NotFound):
            await hooks.delete(name)
        await server.stop()
