"""Record a real kube-apiserver calling admission and conversion webhooks together (issue 24).

A CRD of two versions (v1alpha1 served, v1 stored, a conversion webhook renaming
``spec.size`` <-> ``spec.replicas``), a mutating webhook (label ``stamped: yes``, default
``spec.tier``) and a validating webhook (denies a size/replicas above 10), first with rules
for ``apiVersions: ["*"]``, then for v1 only (matchPolicy Equivalent, then Exact). Every
operation is made at v1alpha1. Writes tests/fixtures/apiserver-1.28-issue24-combined/
NNN-title.json in the format of scripts/capture_issue24.py (whose webhook server and
capture it reuses): ``webhook_calls`` holds the AdmissionReviews *and* ConversionReviews the
server posted, in order, with the answers. Needs a server, so it is not part of
``make test``:

    python scripts/capture_issue24_combined.py [--kubeconfig PATH] [--out DIR]

It creates and deletes only namespace ``combo-rec-*``, CRD group ``combo-cases.example.com``
and webhook configurations ``combo-*``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_issue24 as adm

JSON = dict[str, Any]
GROUP = "combo-cases.example.com"
CRD_NAME = f"widgets.{GROUP}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def size_field(obj: JSON) -> str:
    """The field that holds the size at the object's version."""
    return "size" if str(obj.get("apiVersion", "")).endswith("/v1alpha1") else "replicas"


def convert(obj: JSON, desired: str) -> JSON:
    """v1alpha1 spec.size <-> v1 spec.replicas; everything else as it is."""
    out = json.loads(json.dumps(obj))
    spec = out.get("spec") or {}
    if desired.endswith("/v1") and "size" in spec:
        spec["replicas"] = spec.pop("size")
    if desired.endswith("/v1alpha1") and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    out["apiVersion"] = desired
    return out


async def _convert(review: JSON) -> Any:
    req = review["request"]
    return adm.web.json_response({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": req["uid"], "result": {"status": "Success"},
                     "convertedObjects": [convert(o, req["desiredAPIVersion"])
                                          for o in req["objects"]]}})


async def _mutate(review: JSON) -> Any:
    obj = review["request"].get("object")
    if obj is None:  # a DELETE: nothing to change
        return await adm._json(review)
    ops = adm._label(review, "stamped", "yes")
    if "tier" not in (obj.get("spec") or {}):
        ops.append({"op": "add", "path": "/spec/tier", "value": "standard"})
    return await adm._json(review, **adm._patch(ops))


async def _validate(review: JSON) -> Any:
    obj = review["request"].get("object")
    if obj is not None:
        field = size_field(obj)
        value = (obj.get("spec") or {}).get(field, 0)
        if value > 10:
            return await adm._deny(review, {"message": f"spec.{field} must be at most 10, "
                                                       f"not {value}"})
    return await adm._json(review)


adm.BEHAVIOURS.update({"/convert": _convert, "/mutate-widget": _mutate,
                       "/validate-widget": _validate})


def crd_body(hooks: adm.Hooks) -> JSON:
    def schema(field: str) -> JSON:
        return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {field: {"type": "integer"},
                                             "tier": {"type": "string"}}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False,
                 "schema": schema("size")},
                {"name": "v1", "served": True, "storage": True, "schema": schema("replicas")}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": hooks.url("/convert"), "caBundle": hooks.ca_bundle}}},
        }}


def hook(name: str, url: str, ns: str, ca: str, versions: list[str], policy: str) -> JSON:
    return {
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": url, "caBundle": ca}, "matchPolicy": policy,
        "rules": [{"apiGroups": [GROUP], "apiVersions": versions,
                   "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["widgets"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
    }


def widget(name: str, size: int, **spec: Any) -> JSON:
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


async def wait_crd(cap: adm.Capture, s: aiohttp.ClientSession, gone: bool = False) -> None:
    for _ in range(240):
        status, _, body = await cap.call(s, "GET", f"{CRDS}/{CRD_NAME}")
        if gone and status == 404:
            return
        if not gone and any(c.get("type") == "Established" and c.get("status") == "True"
                            for c in ((body.get("status") or {}).get("conditions") or [])
                            if isinstance(body, dict)):
            await asyncio.sleep(3)
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(CRD_NAME)


async def main(kubeconfig: str, out: Path) -> None:
    cap = adm.Capture(kubeconfig, out)
    h = cap.hooks
    await h.start()
    ns = cap.ns = f"combo-rec-{uuid.uuid4().hex[:6]}"
    base = f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/widgets"
    async with aiohttp.ClientSession() as s:
        status, _, body = await cap.call(s, "POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        assert status == 201, body
        await cap.call(s, "DELETE", f"{CRDS}/{CRD_NAME}")
        await wait_crd(cap, s, gone=True)
        status, _, body = await cap.call(s, "POST", CRDS, crd_body(h))
        assert status == 201, body
        await wait_crd(cap, s)
        try:
            for versions, policy, tag in ((["*"], "Equivalent", "any"),
                                          (["v1"], "Equivalent", "v1-equivalent"),
                                          (["v1"], "Exact", "v1-exact")):
                await cap.configure(s, [{"metadata": {"name": "combo-m"}, "webhooks": [hook(
                    "mutate.combo.example.com", h.url("/mutate-widget"), ns, h.ca_bundle,
                    versions, policy)]}], [{"metadata": {"name": "combo-v"}, "webhooks": [hook(
                        "validate.combo.example.com", h.url("/validate-widget"), ns,
                        h.ca_bundle, versions, policy)]}])
                name = f"w-{tag}"
                await cap.record(s, f"{tag}: create at v1alpha1", "POST", base,
                                 widget(name, 3), query={"fieldManager": "capture"})
                await cap.record(s, f"{tag}: create at v1alpha1 denied", "POST", base,
                                 widget(f"{name}-big", 50))
                await cap.record(s, f"{tag}: dry-run create at v1alpha1", "POST", base,
                                 widget(f"{name}-dry", 4), query={"dryRun": "All"})
                status, _, current = await cap.call(s, "GET", f"{base}/{name}")
                current["spec"]["size"] = 5
                await cap.record(s, f"{tag}: update at v1alpha1", "PUT", f"{base}/{name}",
                                 current)
                await cap.record(s, f"{tag}: merge patch at v1alpha1", "PATCH",
                                 f"{base}/{name}", {"spec": {"size": 6}},
                                 "application/merge-patch+json")
                await cap.record(s, f"{tag}: merge patch at v1alpha1 denied", "PATCH",
                                 f"{base}/{name}", {"spec": {"size": 60}},
                                 "application/merge-patch+json")
                await cap.record(s, f"{tag}: delete at v1alpha1", "DELETE", f"{base}/{name}")
        finally:
            await cap.unconfigure(s)
            await cap.call(s, "DELETE", f"{CRDS}/{CRD_NAME}")
            await cap.call(s, "DELETE", f"/api/v1/namespaces/{ns}")
    assert h.runner is not None
    await h.runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default="/tmp/realk8s/kubeconfig-admin")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                        / "tests" / "fixtures" / "apiserver-1.28-issue24-combined")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.kubeconfig, args.out))
