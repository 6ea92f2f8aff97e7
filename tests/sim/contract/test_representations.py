"""get/list/watch in other representations: Table, PartialObjectMetadata(List), YAML, 406/400.

Shapes follow the reference exchanges 014-017 (Tables), 043/044 (metadata-only) and 124/125.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from watchkeeper_sim import ApiServer

from .._util import cm, open_watch

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"  # in the repo
CMS = "/api/v1/namespaces/default/configmaps"
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json"
)
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
NOT_ACCEPTABLE = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "406: Not Acceptable\n\nAvailable representations: application/json, "
    "application/yaml, application/vnd.kubernetes.protobuf",
    "reason": "NotAcceptable", "details": {}, "code": 406,
}


def accept(value: str) -> dict[str, Any]:
    return {"headers": {"Accept": value}}


@pytest.fixture
def seeded(apiserver: ApiServer) -> ApiServer:
    apiserver.create_object(cm("one", labels={"app": "x"}, a="1"))
    apiserver.create_object(cm("two", a="1", b="2"))
    return apiserver


# ---- negotiation -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CMS, f"{CMS}/one", f"{CMS}?watch=1"])
async def test_unusable_accept_is_406(seeded: ApiServer, req, path: str) -> None:
    status, body, headers = await req("GET", path, **accept("text/html"))
    assert status == 406 and body == NOT_ACCEPTABLE
    assert headers["Content-Type"] == "application/json"


async def test_406_matches_the_reference(seeded: ApiServer, req) -> None:
    (path,) = REFERENCE.glob("124-*.json")
    expected = json.loads(path.read_text())["response"]["body"]
    status, body, _ = await req("GET", f"{CMS}/one", **accept("text/html"))
    assert (status, body) == (406, expected)


async def test_metadata_form_must_fit_the_request(seeded: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, **accept(PARTIAL))
    assert status == 406 and body["message"] == (
        "you requested PartialObjectMetadata, but the requested object is a list "
        "(*v1.ConfigMapList)")
    status, body, _ = await req("GET", f"{CMS}/one", **accept(PARTIAL_LIST))
    assert status == 406 and "is not a list (*v1.ConfigMap)" in body["message"]
    status, body, _ = await req("GET", CMS, params={"watch": "1"}, **accept(PARTIAL_LIST))
    assert status == 406  # watch events are single objects


async def test_bad_include_object_is_400(seeded: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, params={"includeObject": "Everything"},
                                **accept(TABLE))
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == 'unrecognized includeObject value: "Everything"'
    # ignored when no Table is asked for
    status, body, _ = await req("GET", CMS, params={"includeObject": "Everything"})
    assert status == 200 and body["kind"] == "ConfigMapList"


async def test_plain_json_unchanged(seeded: ApiServer, req) -> None:
    for value in ("application/json", "*/*", "application/json, */*", ""):
        status, body, _ = await req("GET", CMS, **accept(value))
        assert status == 200 and body["kind"] == "ConfigMapList"
        assert "kind" not in body["items"][0]  # built-in list items carry no kind


async def test_yaml_get_and_list(seeded: ApiServer, req) -> None:
    status, text, headers = await req("GET", f"{CMS}/one", **accept("application/yaml"))
    assert status == 200 and headers["Content-Type"] == "application/yaml"  # 125
    obj = yaml.safe_load(text)
    assert obj["kind"] == "ConfigMap" and obj["data"] == {"a": "1"}
    assert text.startswith("apiVersion: v1\n")  # keys sorted, as the apiserver writes them
    status, text, _ = await req("GET", CMS, **accept("application/yaml"))
    assert status == 200 and len(yaml.safe_load(text)["items"]) == 2
    status, _, _ = await req("GET", CMS, params={"watch": "1"}, **accept("application/yaml"))
    assert status == 406


# ---- Table -------------------------------------------------------------------------------------


async def test_table_get(seeded: ApiServer, req) -> None:
    status, body, headers = await req("GET", f"{CMS}/one", **accept(TABLE))
    assert status == 200 and headers["Content-Type"] == "application/json"  # 015
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    obj = seeded.get_object("v1", "ConfigMap", "one")
    assert body["metadata"] == {"resourceVersion": obj["metadata"]["resourceVersion"]}
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Data", "Age"]
    (row,) = body["rows"]
    assert row["cells"][:2] == ["one", 1]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["labels"] == {"app": "x"}


async def test_table_list_and_include_object(seeded: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, params={"limit": "500"}, **accept(TABLE))
    assert status == 200 and body["kind"] == "Table"  # 014
    assert body["metadata"]["resourceVersion"] == str(seeded.store.rv)
    assert [r["cells"][:2] for r in body["rows"]] == [["one", 1], ["two", 2]]
    assert all(r["object"]["kind"] == "PartialObjectMetadata" for r in body["rows"])
    assert "data" not in body["rows"][0]["object"]
    _, body, _ = await req("GET", CMS, params={"includeObject": "Object"}, **accept(TABLE))
    full = body["rows"][0]["object"]
    assert (full["kind"], full["apiVersion"], full["data"]) == ("ConfigMap", "v1", {"a": "1"})
    _, body, _ = await req("GET", CMS, params={"includeObject": "None"}, **accept(TABLE))
    assert [r["object"] for r in body["rows"]] == [None, None]


async def test_table_list_pages_and_selectors(seeded: ApiServer, req) -> None:
    _, body, _ = await req("GET", CMS, params={"limit": "1"}, **accept(TABLE))
    assert len(body["rows"]) == 1 and body["metadata"]["continue"]
    assert body["metadata"]["remainingItemCount"] == 1
    _, body, _ = await req("GET", CMS, params={"limit": "1", "continue": body["metadata"][
        "continue"]}, **accept(TABLE))
    assert [r["cells"][0] for r in body["rows"]] == ["two"]
    _, body, _ = await req("GET", CMS, params={"labelSelector": "app=x"}, **accept(TABLE))
    assert [r["cells"][0] for r in body["rows"]] == ["one"]


async def test_table_of_a_custom_resource(apiserver: ApiServer, req) -> None:
    apiserver.create_object({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    apiserver.create_object({"apiVersion": "example.com/v1", "kind": "Widget",
                             "metadata": {"name": "w"}})
    path = "/apis/example.com/v1/namespaces/default/widgets"
    status, body, _ = await req("GET", path, params={"includeObject": "Object"},
                                **accept(TABLE))
    assert status == 200  # 150: Name + Age (a date)
    assert [(c["name"], c["type"]) for c in body["columnDefinitions"]] == [
        ("Name", "string"), ("Age", "date")]
    assert body["rows"][0]["object"]["kind"] == "Widget"


async def test_table_watch(seeded: ApiServer, session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, seeded, CMS, accept=TABLE, resourceVersion="0",
                         timeoutSeconds=2)
    assert w.status == 200 and w.headers["Content-Type"] == "application/json"
    first, second = await w.next(), await w.next()
    assert first is not None and second is not None
    assert first["type"] == second["type"] == "ADDED"
    assert [c["name"] for c in first["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert second["object"]["columnDefinitions"] is None  # 017: only the first line has them
    assert [first["object"]["rows"][0]["cells"][0], second["object"]["rows"][0]["cells"][0]] \
        == ["one", "two"]
    seeded.delete_object("v1", "ConfigMap", "one")
    deleted = await w.next()
    assert deleted is not None and deleted["type"] == "DELETED"
    table = deleted["object"]
    assert table["kind"] == "Table" and table["columnDefinitions"] is None
    assert table["metadata"]["resourceVersion"] == str(seeded.store.rv)
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    w.close()


async def test_table_watch_include_object(seeded: ApiServer,
                                          session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, seeded, CMS, accept=TABLE, resourceVersion="0",
                         includeObject="Object", timeoutSeconds=1)
    ev = await w.next()
    assert ev is not None
    assert ev["object"]["rows"][0]["object"]["kind"] == "ConfigMap"
    w.close()


async def test_table_watch_error_line_passes_through(seeded: ApiServer,
                                                     session: aiohttp.ClientSession) -> None:
    seeded.compact()
    w = await open_watch(session, seeded, CMS, accept=TABLE, resourceVersion="1")
    assert w.status == 200
    lines = await w.rest()
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["kind"] == "Status" and lines[0]["object"]["code"] == 410


# ---- metadata only -----------------------------------------------------------------------------


async def test_partial_object_metadata_get(seeded: ApiServer, req) -> None:
    status, body, headers = await req("GET", f"{CMS}/one", **accept(PARTIAL))
    assert status == 200 and headers["Content-Type"] == "application/json"  # 044
    stored = seeded.get_object("v1", "ConfigMap", "one")
    assert body == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": stored["metadata"]}


async def test_partial_object_metadata_list(seeded: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, params={"limit": "1"}, **accept(PARTIAL_LIST))
    assert status == 200 and body["kind"] == "PartialObjectMetadataList"  # 043
    assert body["apiVersion"] == "meta.k8s.io/v1"
    assert body["metadata"]["continue"] and body["metadata"]["remainingItemCount"] == 1
    (item,) = body["items"]
    assert item["kind"] == "PartialObjectMetadata" and set(item) == {"kind", "apiVersion",
                                                                      "metadata"}
    # the client-go metadata client's header: protobuf first, which is skipped
    client_go = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;"
                 f"g=meta.k8s.io;v=v1,{PARTIAL_LIST},application/json")
    status, body, _ = await req("GET", CMS, **accept(client_go))
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["one", "two"]


async def test_partial_object_metadata_watch(seeded: ApiServer,
                                             session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, seeded, CMS, accept=PARTIAL, resourceVersion="",
                         sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
                         allowWatchBookmarks="true", timeoutSeconds=2)
    assert w.status == 200
    initial = [await w.next(), await w.next()]
    assert [e["type"] for e in initial if e] == ["ADDED", "ADDED"]
    assert all(e and set(e["object"]) == {"kind", "apiVersion", "metadata"} for e in initial)
    assert all(e and e["object"]["kind"] == "PartialObjectMetadata" for e in initial)
    end = await w.next()
    assert end is not None and end["type"] == "BOOKMARK"
    assert end["object"]["kind"] == "PartialObjectMetadata"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    obj = seeded.get_object("v1", "ConfigMap", "two")
    obj["data"] = {"changed": "yes"}
    seeded.update_object(obj)
    ev = await w.until("MODIFIED")
    assert ev["object"]["metadata"]["name"] == "two" and "data" not in ev["object"]
    assert ev["object"]["metadata"]["resourceVersion"] == str(seeded.store.rv)
    w.close()
