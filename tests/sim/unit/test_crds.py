"""CustomResourceDefinitions: serving, status subresource, 415 for strategic merge, deletion."""

from __future__ import annotations

import aiohttp

from watchkeeper_sim import ApiServer

from .._util import open_watch

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget_crd(scope: str = "Namespaced") -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": scope,
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                           "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def widget(name: str, size: int = 1) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}}


async def test_crd_lifecycle(apiserver: ApiServer, req, session: aiohttp.ClientSession) -> None:
    status, body, _ = await req("GET", WIDGETS)
    assert status == 404 and body == "404 page not found\n"
    status, crd, _ = await req("POST", CRDS, json=widget_crd())
    assert status == 201 and crd["status"]["conditions"] is None
    status, crd, _ = await req("GET", f"{CRDS}/widgets.example.com")
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    status, body, _ = await req("GET", "/apis/example.com/v1")
    assert [r["name"] for r in body["resources"]] == ["widgets", "widgets/status"]

    status, w1, _ = await req("POST", WIDGETS, json=widget("w1"))
    assert status == 201 and w1["metadata"]["generation"] == 1
    status, body, _ = await req("POST", WIDGETS, json=widget("w1"))
    assert status == 409 and body["details"] == {"name": "w1", "group": "example.com",
                                                 "kind": "widgets"}
    assert body["message"] == 'widgets.example.com "w1" already exists'
    status, body, _ = await req("GET", f"{WIDGETS}/nope")
    assert status == 404 and body["message"] == 'widgets.example.com "nope" not found'
    status, body, _ = await req("PATCH", f"{WIDGETS}/w1", json={"spec": {"size": 6}},
                                headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 415 and body["message"].endswith(
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    status, w1, _ = await req("PATCH", f"{WIDGETS}/w1", json={"spec": {"size": 2}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert w1["metadata"]["generation"] == 2
    w1["status"] = {"phase": "Ready"}
    w1["spec"]["size"] = 99
    status, s, _ = await req("PUT", f"{WIDGETS}/w1/status", json=w1)
    assert s["status"] == {"phase": "Ready"} and s["spec"]["size"] == 2
    status, body, _ = await req("GET", WIDGETS)
    assert body["kind"] == "WidgetList" and body["items"][0]["kind"] == "Widget"

    await req("POST", WIDGETS, json=widget("w2"))
    w = await open_watch(session, apiserver, WIDGETS, resourceVersion=apiserver.store.rv,
                         allowWatchBookmarks=True)
    status, body, _ = await req("DELETE", f"{CRDS}/widgets.example.com")
    assert status == 200 and body["kind"] == "CustomResourceDefinition"
    assert body["metadata"]["deletionTimestamp"]
    assert "customresourcecleanup.apiextensions.k8s.io" in body["metadata"]["finalizers"]
    events = await w.rest()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events
            if e["type"] != "BOOKMARK"] == [("DELETED", "w1"), ("DELETED", "w2")]
    status, body, _ = await req("GET", WIDGETS)
    assert status == 404 and body == "404 page not found\n"
    status, _, _ = await req("GET", f"{CRDS}/widgets.example.com")
    assert status == 404


async def test_cluster_scoped_crd_and_invalid_crd(apiserver: ApiServer, req) -> None:
    status, _, _ = await req("POST", CRDS, json=widget_crd("Cluster"))
    assert status == 201
    status, body, _ = await req("POST", "/apis/example.com/v1/widgets",
                                json={"apiVersion": "example.com/v1", "kind": "Widget",
                                      "metadata": {"name": "c"}})
    assert status == 201 and "namespace" not in body["metadata"]
    bad = widget_crd()
    bad["metadata"]["name"] = "wrong"
    bad["spec"]["group"] = "other.com"
    status, body, _ = await req("POST", CRDS, json=bad)
    assert status == 422 and body["reason"] == "Invalid"
