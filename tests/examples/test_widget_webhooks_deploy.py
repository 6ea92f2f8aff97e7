"""examples/deploy/widget-webhooks.yaml's RBAC is all the webhook certificates need: on the
simulator (which evaluates RBAC as a cluster does), a CertificateManager running as the
operator's ServiceAccount creates its Secret, publishes the caBundle into the webhook
configurations and the CRD, and replaces the Secret on rotation, with no request refused;
and the same ServiceAccount may not touch another Secret."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

import watchkeeper as wk
from watchkeeper.client.auth import StaticToken
from watchkeeper_sim import ApiServer

from .test_widget_operator import widget_operator

pytest.importorskip("cryptography")

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy"
NS, SA = "widget-system", "widget-operator"


def hook_config(kind: str) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "widget-operator"},
            "webhooks": [{"name": "widgets.widget-operator.example.com",
                          "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "clientConfig": {"service": {"name": "widget-operator-webhook",
                                                       "namespace": NS, "path": "/w"}},
                          "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"],
                                     "apiVersions": ["v1"], "resources": ["widgets"]}]}]}


async def test_the_webhook_rbac_is_all_the_certificate_manager_needs() -> None:
    from watchkeeper.webhooks import CertificateManager, WebhookCerts

    crd = copy.deepcopy(widget_operator.CRD)
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {"service": {
            "name": "widget-operator-webhook", "namespace": NS, "path": "/convert"}}}}
    async with ApiServer() as srv:
        srv.create_object(crd)
        srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        srv.create_object({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": SA, "namespace": NS}})
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            srv.create_object(hook_config(kind))
        for doc in yaml.safe_load_all((DEPLOY / "widget-webhooks.yaml").read_text()):
            srv.create_object(doc)
        async with srv.client() as admin:
            resp = await admin.transport.request(
                "POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token",
                body=b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest"}',
                content_type="application/json")
            token = msgspec.json.decode(resp.body)["status"]["token"]
            config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
            certs = WebhookCerts("widget-operator-webhook", NS, validating=("widget-operator",),
                                 mutating=("widget-operator",), crds=("widgets.example.com",))
            async with wk.Client(config) as client:
                mgr = CertificateManager(client, certs)
                await mgr.ensure()  # creates the Secret
                assert await mgr.publish() == 3
                bundle = mgr.ca_bundle
                for api, name, where in (
                    ("validatingwebhookconfigurations.admissionregistration.k8s.io",
                     "widget-operator", ("webhooks", 0, "clientConfig")),
                    ("mutatingwebhookconfigurations.admissionregistration.k8s.io",
                     "widget-operator", ("webhooks", 0, "clientConfig")),
                    ("customresourcedefinitions.apiextensions.k8s.io", "widgets.example.com",
                     ("spec", "conversion", "webhook", "clientConfig")),
                ):
                    obj: Any = await admin.api(api, None).get(name)
                    for step in where:
                        obj = obj[step]
                    assert obj["caBundle"] == base64.b64encode(bundle).decode()
                first = (await admin.api("secrets", NS).get("widget-operator-webhook-tls"))
                # a year and a half later the serving certificate is replaced: an update
                later = CertificateManager(client, certs, clock=lambda: dt.datetime.now(
                    dt.UTC) + dt.timedelta(days=500))
                await later.ensure()
                second = (await admin.api("secrets", NS).get("widget-operator-webhook-tls"))
                assert (second["metadata"]["resourceVersion"]
                        != first["metadata"]["resourceVersion"])
                # and nothing more: another Secret is out of reach
                with pytest.raises(wk.Forbidden):
                    await client.api("secrets", NS).get("someone-elses")
