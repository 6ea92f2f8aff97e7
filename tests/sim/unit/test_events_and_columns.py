"""One set of Events behind core/v1 and events.k8s.io/v1, and CRD additionalPrinterColumns in
Tables (issue 10, item 15)."""

from __future__ import annotations

from typing import Any

import aiohttp

import watchkeeper as wk
from watchkeeper.controller.recorder import Recorder
from watchkeeper_sim import ApiServer

from .._util import cm, open_watch

CORE = "/api/v1/namespaces/default/events"
V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
NOW = "2026-12-04T10:00:00.000000Z"


def new_event(name: str, regarding: dict[str, Any]) -> dict[str, Any]:
    """What the Recorder writes (events.k8s.io/v1)."""
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": NOW, "reportingController": "demo-controller",
            "reportingInstance": "demo-controller-1", "action": "Reconcile",
            "reason": "Reconciled", "note": "all good", "type": "Normal",
            "regarding": regarding}


def old_event(name: str) -> dict[str, Any]:
    """What a client-go EventRecorder writes (core/v1)."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "a",
                               "apiVersion": "v1"},
            "reason": "Synced", "message": "synced it", "source": {"component": "old-ctrl"},
            "firstTimestamp": "2026-12-04T09:00:00Z", "lastTimestamp": "2026-12-04T09:05:00Z",
            "count": 3, "type": "Warning"}


async def test_an_event_written_through_events_v1_is_a_core_event(
        apiserver: ApiServer, req) -> None:
    configmap = apiserver.create_object(cm("a"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default",
           "uid": configmap["metadata"]["uid"]}
    status, created, _ = await req("POST", V1, json=new_event("a.1", ref))
    assert status == 201, created
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "all good"
    assert created["regarding"] == ref
    status, core, _ = await req("GET", f"{CORE}/a.1")
    assert status == 200
    assert {k: core[k] for k in core if k != "metadata"} == {
        "kind": "Event", "apiVersion": "v1", "involvedObject": ref, "reason": "Reconciled",
        "message": "all good", "source": {}, "firstTimestamp": None, "lastTimestamp": None,
        "type": "Normal", "eventTime": NOW, "action": "Reconcile",
        "reportingComponent": "demo-controller", "reportingInstance": "demo-controller-1"}
    assert core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # kubectl describe's query: core/v1 with involvedObject field selectors
    selector = (f"involvedObject.name=a,involvedObject.namespace=default,"
                f"involvedObject.kind=ConfigMap,involvedObject.uid={ref['uid']}")
    status, listed, _ = await req("GET", CORE, params={"fieldSelector": selector})
    assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["a.1"]
    assert listed["items"][0]["message"] == "all good"
    status, listed, _ = await req("GET", "/apis/events.k8s.io/v1/events")
    assert [i["note"] for i in listed["items"]] == ["all good"]


async def test_a_core_event_is_served_by_events_v1(apiserver: ApiServer, req) -> None:
    status, _, _ = await req("POST", CORE, json=old_event("old"))
    assert status == 201
    status, ev, _ = await req("GET", f"{V1}/old")
    assert status == 200
    assert {k: ev[k] for k in ev if k != "metadata"} == {
        "kind": "Event", "apiVersion": "events.k8s.io/v1", "eventTime": None,
        "reason": "Synced", "regarding": old_event("old")["involvedObject"],
        "note": "synced it", "type": "Warning", "deprecatedSource": {"component": "old-ctrl"},
        "deprecatedFirstTimestamp": "2026-12-04T09:00:00Z",
        "deprecatedLastTimestamp": "2026-12-04T09:05:00Z", "deprecatedCount": 3}
    # a patch through events.k8s.io names its fields; the core view sees the change
    status, patched, _ = await req(
        "PATCH", f"{V1}/old", json={"note": "changed", "series": {"count": 2,
                                                                  "lastObservedTime": NOW}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, patched
    assert patched["note"] == "changed" and "message" not in patched
    status, core, _ = await req("GET", f"{CORE}/old")
    assert core["message"] == "changed" and core["series"]["count"] == 2
    assert "note" not in core
    status, _, _ = await req("DELETE", f"{V1}/old")
    assert status == 200
    status, _, _ = await req("GET", f"{CORE}/old")
    assert status == 404


async def test_watches_of_either_view_see_writes_through_the_other(
        apiserver: ApiServer, req, session: aiohttp.ClientSession) -> None:
    rv = apiserver.store.rv
    core_watch = await open_watch(session, apiserver, CORE, resourceVersion=rv)
    v1_watch = await open_watch(session, apiserver, V1, resourceVersion=rv)
    await req("POST", V1, json=new_event("n", {"kind": "ConfigMap", "name": "a"}))
    await req("POST", CORE, json=old_event("o"))
    seen_core = [await core_watch.next(), await core_watch.next()]
    seen_v1 = [await v1_watch.next(), await v1_watch.next()]
    assert [(e["type"], e["object"]["apiVersion"]) for e in seen_core] == [
        ("ADDED", "v1"), ("ADDED", "v1")]
    assert [e["object"]["message"] for e in seen_core] == ["all good", "synced it"]
    assert [(e["type"], e["object"]["apiVersion"]) for e in seen_v1] == [
        ("ADDED", "events.k8s.io/v1"), ("ADDED", "events.k8s.io/v1")]
    assert [e["object"]["note"] for e in seen_v1] == ["all good", "synced it"]
    core_watch.close()
    v1_watch.close()


async def test_the_runtime_recorder_is_seen_through_core_v1(apiserver: ApiServer, req) -> None:
    regarding = apiserver.create_object(cm("target"))
    async with apiserver.client() as client:
        await Recorder(client, "demo-controller").publish(regarding, reason="Reconciled",
                                                          note="reconciled it")
        core = await client.api("events", namespace="default").list(
            field_selector="involvedObject.name=target")
    assert [(wk.meta.namespace(e), e["message"], e["reportingComponent"], e["reason"])
            for e in core.items] == [("default", "reconciled it", "demo-controller",
                                      "Reconciled")]


async def test_event_tables_use_the_event_printer(apiserver: ApiServer, req) -> None:
    await req("POST", CORE, json=old_event("old"))
    await req("POST", V1, json=new_event("new", {"kind": "ConfigMap", "name": "a"}))
    for path in (CORE, V1):
        status, table, _ = await req("GET", path, headers={"Accept": TABLE})
        assert status == 200
        assert [c["name"] for c in table["columnDefinitions"]] == [
            "Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message",
            "First Seen", "Count", "Name"]
        assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 0, 1, 1, 0,
                                                                        1, 1, 1]
        cells = {r["cells"][-1]: r["cells"] for r in table["rows"]}
        assert cells["new"][1:] == ["Normal", "Reconciled", "configmap/a", "",
                                    "demo-controller, demo-controller-1", "all good",
                                    cells["new"][7], 1, "new"]
        assert cells["new"][0] == cells["new"][7]  # no lastTimestamp: the first time
        assert cells["old"][1:7] == ["Warning", "Synced", "configmap/a", "", "old-ctrl",
                                     "synced it"]
        assert cells["old"][8] == 3


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{
                 "name": "v1", "served": True, "storage": True,
                 "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                 "additionalPrinterColumns": [
                     {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                     {"name": "Color", "type": "string", "jsonPath": ".spec.color",
                      "description": "The widget's color."},
                     {"name": "Parts", "type": "string", "jsonPath": ".spec.parts",
                      "priority": 1},
                     {"name": "First", "type": "string", "jsonPath": ".spec.parts[0]",
                      "priority": 1},
                     {"name": "Heavy", "type": "boolean", "jsonPath": ".spec.heavy"},
                     {"name": "Age", "type": "date",
                      "jsonPath": ".metadata.creationTimestamp"},
                 ]}]}}


async def test_custom_resource_tables_use_additional_printer_columns(
        apiserver: ApiServer, req) -> None:
    status, body, _ = await req("POST", "/apis/apiextensions.k8s.io/v1/"
                                        "customresourcedefinitions", json=CRD)
    assert status == 201, body
    path = "/apis/example.com/v1/namespaces/default/widgets"
    for name, spec in (("w1", {"size": 3, "color": "blue", "parts": ["a", "b"],
                               "heavy": True}),
                       ("w2", {"size": 2.9})):
        status, body, _ = await req("POST", path, json={
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec})
        assert status == 201, body
    status, table, _ = await req("GET", path, headers={"Accept": TABLE})
    assert status == 200
    assert table["columnDefinitions"][0]["name"] == "Name"
    assert table["columnDefinitions"][1:] == [
        {"name": "Size", "type": "integer", "format": "",
         "description": "Custom resource definition column (in JSONPath format): .spec.size",
         "priority": 0},
        {"name": "Color", "type": "string", "format": "", "description": "The widget's color.",
         "priority": 0},
        {"name": "Parts", "type": "string", "format": "",
         "description": "Custom resource definition column (in JSONPath format): .spec.parts",
         "priority": 1},
        {"name": "First", "type": "string", "format": "",
         "description": "Custom resource definition column (in JSONPath format): "
                        ".spec.parts[0]", "priority": 1},
        {"name": "Heavy", "type": "boolean", "format": "",
         "description": "Custom resource definition column (in JSONPath format): "
                        ".spec.heavy", "priority": 0},
        {"name": "Age", "type": "date", "format": "",
         "description": "Custom resource definition column (in JSONPath format): "
                        ".metadata.creationTimestamp", "priority": 0},
    ]
    rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
    # a list in a string column is JSON (client-go jsonpath PrintResults; kube-apiserver
    # 1.28 answers '["x","y"]', tests/fixtures/apiserver-1.28-issue22), not Go's "[a b]"
    assert rows["w1"][:6] == ["w1", 3, "blue", '["a","b"]', "a", True]
    assert rows["w2"][:6] == ["w2", 2, None, None, None, None]  # missing paths: null cells
    assert rows["w1"][6].endswith("s")  # an age, from the date column
    status, one, _ = await req("GET", f"{path}/w1", headers={"Accept": TABLE})
    assert [c["name"] for c in one["columnDefinitions"]] == [
        "Name", "Size", "Color", "Parts", "First", "Heavy", "Age"]
