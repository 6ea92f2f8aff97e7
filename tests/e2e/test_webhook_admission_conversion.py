"""Admission and conversion webhooks of one ``WebhookServer`` on one CRD of two versions, on
a real kube-apiserver and on the simulator alike (tests/sim/contract runs this suite against
it). ``v1alpha1`` (``spec.size``) is served, ``v1`` (``spec.replicas``) stored, converted by
``wk.convert``; a mutating handler defaults ``spec.tier`` and labels the object, a
validating handler refuses a size above 10. Every object is written at v1alpha1 with
``kubectl apply``; the webhooks' rules cover every version, or v1 only (matchPolicy
Equivalent: the API server shows them the object converted to v1, recorded in
tests/fixtures/apiserver-1.28-issue24-combined). An invalid object is denied with the
handler's message, naming the field as the handler saw it; a valid one is stored defaulted,
and ``kubectl get`` shows the default at v1alpha1 and at v1. Needs an API server that can
reach 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

import watchkeeper as wk
from e2e.conftest import LABELS
from e2e.test_webhook_server import kubectl
from e2e.webhook_crds import conversion_crd
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    Denied,
    WebhookCerts,
    WebhookServer,
)


class WidgetSpecV1alpha1(wk.Schema):
    size: int = 1
    tier: str | None = None


class WidgetSpecV1(wk.Schema):
    replicas: int = 1
    tier: str | None = None


def widget(group: str, name: str, size: int) -> str:
    return json.dumps({"apiVersion": f"{group}/v1alpha1", "kind": "Widget",
                       "metadata": {"name": name}, "spec": {"size": size}})


def _hook(name: str, url: str, namespace: str, group: str, versions: list[str]) -> Any:
    return {
        "name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail", "timeoutSeconds": 5, "clientConfig": {"url": url},
        "matchPolicy": "Equivalent",
        "rules": [{"apiGroups": [group], "apiVersions": versions,
                   "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    }


@pytest.mark.parametrize(("versions", "field"), [(["*"], "size"), (["v1"], "replicas")],
                         ids=["rules-any-version", "rules-v1-equivalent"])
async def test_a_v1alpha1_apply_is_denied_or_defaulted_and_read_defaulted_at_both_versions(
    client: wk.Client, namespace: str, versions: list[str], field: str,
) -> None:
    group = f"{namespace}.example.com"

    @wk.custom_resource(group=group, version="v1alpha1", kind="Widget", storage=False)
    class WidgetV1alpha1(wk.CustomResource):
        spec: WidgetSpecV1alpha1

    @wk.custom_resource(group=group, version="v1", kind="Widget", storage=True)
    class WidgetV1(wk.CustomResource):
        spec: WidgetSpecV1

    @wk.conversion(WidgetV1alpha1, WidgetV1)
    def up(old: WidgetV1alpha1) -> WidgetV1:
        return WidgetV1(spec=WidgetSpecV1(replicas=old.spec.size, tier=old.spec.tier))

    @wk.conversion(WidgetV1, WidgetV1alpha1)
    def down(new: WidgetV1) -> WidgetV1alpha1:
        return WidgetV1alpha1(spec=WidgetSpecV1alpha1(size=new.spec.replicas,
                                                      tier=new.spec.tier))

    crd_name = f"widgets.{group}"
    hooks_name = f"{namespace}-widgets"
    mgr = CertificateManager(client, WebhookCerts(
        "hooks", namespace, local_hosts=True, validating=(hooks_name,),
        mutating=(hooks_name,), crds=(crd_name,)))
    server = WebhookServer(mgr, port=0)
    server.conversion("/convert", WidgetV1alpha1, WidgetV1)
    shown: list[str] = []  # the apiVersion each admission call was shown

    @server.mutating("/default")
    async def default(req: AdmissionRequest[Any]) -> dict[str, Any]:
        obj = dict(req.object or {})
        shown.append(obj["apiVersion"])
        meta = dict(obj["metadata"])
        meta["labels"] = {**(meta.get("labels") or {}), "stamped": "yes"}
        return {**obj, "metadata": meta, "spec": {"tier": "standard", **obj.get("spec", {})}}

    @server.validating("/validate")
    async def validate(req: AdmissionRequest[Any]) -> None:
        obj = req.object or {}
        shown.append(obj["apiVersion"])
        name = "size" if obj["apiVersion"].endswith("/v1alpha1") else "replicas"
        value = (obj.get("spec") or {}).get(name, 0)
        if value > 10:
            raise Denied(f"spec.{name} must be at most 10, not {value}")

    await server.start()
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    hooks_api = {
        kind: client.api(f"{kind.lower()}webhookconfigurations.admissionregistration.k8s.io",
                         None)
        for kind in ("Validating", "Mutating")}

    def schema(size: str) -> dict[str, Any]:
        return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {size: {"type": "integer"},
                                             "tier": {"type": "string"}}}}}}

    await crds.create(conversion_crd(
        group, "Widget", "widgets", {"v1alpha1": schema("size"), "v1": schema("replicas")},
        "v1", {"url": server.url + "/convert"}))
    try:
        for kind, path in (("Validating", "/validate"), ("Mutating", "/default")):
            await hooks_api[kind].create({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": f"{kind}WebhookConfiguration",
                "metadata": {"name": hooks_name, "labels": dict(LABELS)},
                "webhooks": [_hook(f"{kind.lower()}.widgets.example.com", server.url + path,
                                   namespace, group, versions)]})
        await mgr.publish()
        message = f"spec.{field} must be at most 10, not 50"
        async with asyncio.timeout(60):  # until the CRD is served and the webhooks apply
            while True:
                probe = await asyncio.to_thread(
                    kubectl, "-n", namespace, "apply", "--dry-run=server", "-f", "-",
                    stdin=widget(group, "probe", 50))
                if message in probe.stderr:
                    break
                await asyncio.sleep(0.5)

        shown.clear()
        denied = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "-f", "-",
                                         stdin=widget(group, "big", 50))
        assert denied.returncode != 0
        assert f'admission webhook "validating.widgets.example.com" denied the request: ' \
               f"{message}" in denied.stderr
        assert set(shown) == {f"{group}/{'v1alpha1' if field == 'size' else 'v1'}"}

        applied = await asyncio.to_thread(kubectl, "-n", namespace, "apply", "-f", "-",
                                          stdin=widget(group, "small", 3))
        assert applied.returncode == 0, applied.stderr
        for version, spec in (("v1alpha1", {"size": 3, "tier": "standard"}),
                              ("v1", {"replicas": 3, "tier": "standard"})):
            got = await asyncio.to_thread(kubectl, "-n", namespace, "get",
                                          f"widgets.{version}.{group}", "small", "-o", "json")
            assert got.returncode == 0, got.stderr
            obj = json.loads(got.stdout)
            assert obj["apiVersion"] == f"{group}/{version}"
            assert obj["spec"] == spec
            assert obj["metadata"]["labels"] == {"stamped": "yes"}
        stored = await client.api(WidgetV1, namespace).get("small")
        assert stored.spec == WidgetSpecV1(replicas=3, tier="standard")
        with pytest.raises(wk.NotFound):
            await client.api(WidgetV1, namespace).get("big")
    finally:
        for api in hooks_api.values():
            with contextlib.suppress(wk.NotFound):
                await api.delete(hooks_name)
        with contextlib.suppress(wk.NotFound):
            await crds.delete(crd_name)
        await server.stop()
