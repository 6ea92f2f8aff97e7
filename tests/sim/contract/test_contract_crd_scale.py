"""The scale subresource in aggregated discovery, its checks on a custom resource's own
writes, a Scale the object cannot give, and who owns a scaled field: kube-apiserver
1.28.7's answers (crd_scale_1.28.json; the GET/PATCH/PUT of /scale itself is the
conformance scenario crd-scale-subresource)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from watchkeeper_sim import ApiServer

GROUP = "example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/default/widgets"
RECORDED = json.loads((Path(__file__).parent / "crd_scale_1.28.json").read_text())
MERGE = {"Content-Type": "application/merge-patch+json"}
INT = {"type": "integer"}
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def recorded(key: str) -> Any:
    return json.loads(json.dumps(RECORDED[key]).replace("{group}", GROUP))


def widget_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}, "scale": {
                                   "specReplicasPath": ".spec.replicas",
                                   "statusReplicasPath": ".status.replicas",
                                   "labelSelectorPath": ".status.selector"}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {"replicas": INT}},
                                   "status": {"type": "object", "properties": {
                                       "replicas": INT, "selector": {"type": "string"}}}}}}}]},
    }


def widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}


async def test_the_scale_checks_guard_the_objects_own_writes(apiserver: ApiServer,
                                                             req: Any) -> None:
    status, _, _ = await req("POST", CRDS, json=widget_crd())
    assert status == 201
    status, body, _ = await req("GET", "/apis", headers={"Accept": AGGREGATED})
    assert status == 200
    assert [g for g in body["items"] if g["metadata"]["name"] == GROUP] == [
        recorded("aggregated discovery (v2beta1) of the group")]
    # the strategy checks the replicas paths on every write, not only through /scale
    status, body, _ = await req("POST", WIDGETS, json=widget("w1", {"replicas": -1}))
    assert (status, body) == (422, recorded("create with spec.replicas -1"))
    status, _, _ = await req("POST", WIDGETS, json=widget("w2", {}))
    assert status == 201
    status, body, _ = await req("PATCH", f"{WIDGETS}/w2/status", headers=MERGE,
                                json={"status": {"replicas": -2}})
    assert (status, body) == (422, recorded("status with status.replicas -2"))
    status, body, _ = await req("PATCH", f"{WIDGETS}/w2", headers=MERGE,
                                json={"spec": {"replicas": 3000000000}})
    assert (status, body) == (422, recorded("patch with spec.replicas 3000000000"))
    # no spec.replicas: the object has no Scale to read or to patch
    for method, kw in (("GET", {}), ("PATCH", {"headers": MERGE,
                                               "json": {"spec": {"replicas": 2}}})):
        status, body, _ = await req(method, f"{WIDGETS}/w2/scale", **kw)
        assert (status, body) == (500, recorded("scale of an object without spec.replicas"))
    status, body, _ = await req("PATCH", f"{WIDGETS}/w2", headers=MERGE,
                                json={"spec": {"replicas": 2}})
    assert status == 200 and body["metadata"]["generation"] == 2
    status, body, _ = await req("GET", f"{WIDGETS}/w2/scale")
    assert (status, body["spec"], body["status"]) == (200, {"replicas": 2}, {"replicas": 0})
    status, body, _ = await req("PATCH", f"{WIDGETS}/w2/scale?fieldManager=scaler",
                                headers=MERGE, json={"spec": {"replicas": 3}})
    assert (status, body["spec"]) == (200, {"replicas": 3})
    status, body, _ = await req("GET", f"{WIDGETS}/w2")
    # the write is the scaler's, on /scale, and (as 1.28.7 records it) has no time
    [entry] = [e for e in body["metadata"]["managedFields"] if e["manager"] == "scaler"]
    assert (entry["operation"], entry["subresource"], "time" in entry) == ("Update", "scale",
                                                                           False)
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}
