"""Contract tests: discovery, OpenAPI and Table documents against real kube-apiserver 1.28.

The resource types are derived from the reference documents themselves, so each comparison
asks one question: given what the real server serves, do we describe it the same way?
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from watchkeeper_sim.documents import discovery as disc
from watchkeeper_sim.documents import openapi as oapi
from watchkeeper_sim.documents import table as table
from watchkeeper_sim.model import ResourceType

JSON = dict[str, Any]

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"  # in the repo
KUBECTL_TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json"
)
HASH = re.compile(r"^[0-9A-F]{128}$")


def exchange(number: str) -> JSON:
    (path,) = REFERENCE.glob(f"{number}-*.json")
    data: JSON = json.loads(path.read_text())
    return data


def body(number: str) -> Any:
    return exchange(number)["response"]["body"]


def dumps(obj: Any) -> str:
    """Order-sensitive comparison: the apiserver's key order is part of the contract."""
    return json.dumps(obj)


# ---------------------------------------------------------------------------------------------
# Types derived from the reference documents


def types_from_resource_list(doc: JSON) -> list[ResourceType]:
    group, _, version = doc["groupVersion"].rpartition("/")
    names = {r["name"] for r in doc["resources"]}
    return [
        ResourceType(
            group=group,
            version=version,
            plural=r["name"],
            kind=r["kind"],
            namespaced=r["namespaced"],
            singular=r["singularName"],
            short_names=tuple(r.get("shortNames", ())),
            has_status=f"{r['name']}/status" in names,
            verbs=tuple(r["verbs"]),
            categories=tuple(r.get("categories", ())),
            is_custom=group == "example.com",
        )
        for r in doc["resources"]
        if "/" not in r["name"]
    ]


def types_from_aggregated(doc: JSON) -> list[ResourceType]:
    out: list[ResourceType] = []
    for item in doc["items"]:
        group = item["metadata"].get("name", "")
        for version in item["versions"]:
            for r in version["resources"]:
                subs = {s["subresource"] for s in r.get("subresources", [])}
                out.append(
                    ResourceType(
                        group=group,
                        version=version["version"],
                        plural=r["resource"],
                        kind=r["responseKind"]["kind"],
                        namespaced=r["scope"] == "Namespaced",
                        singular=r["singularResource"],
                        short_names=tuple(r.get("shortNames", ())),
                        has_status="status" in subs,
                        verbs=tuple(r["verbs"]),
                        categories=tuple(r.get("categories", ())),
                    )
                )
    return out


# The subresources the simulator serves: status, plus namespaces/finalize and
# serviceaccounts/token (TokenRequest).
SERVED_SUBRESOURCES = ("namespaces/finalize", "serviceaccounts/token")


def served_subresource(resource: str, sub: str) -> bool:
    return sub == "status" or f"{resource}/{sub}" in SERVED_SUBRESOURCES


def only_status_subresources(doc: JSON) -> JSON:
    """The reference without the subresources we do not serve (pods/exec, .../scale...)."""
    doc = json.loads(json.dumps(doc))
    for item in doc["items"]:
        for version in item["versions"]:
            for r in version["resources"]:
                subs = [s for s in r.pop("subresources", [])
                        if served_subresource(r["resource"], s["subresource"])]
                if subs:
                    r["subresources"] = subs
    return doc


WIDGET = ResourceType(
    group="example.com", version="v1", plural="widgets", kind="Widget", namespaced=True,
    singular="widget", short_names=("wd",), has_status=True, is_custom=True,
)
CONFIGMAP = ResourceType(group="", version="v1", plural="configmaps", kind="ConfigMap",
                         namespaced=True, singular="configmap", short_names=("cm",))


# ---------------------------------------------------------------------------------------------
# Legacy discovery


def test_api_versions_matches_002() -> None:
    assert dumps(disc.api_versions("127.0.0.1:6443")) == dumps(body("002"))


@pytest.mark.parametrize("number", ["004", "005", "139"])
def test_resource_lists_match_reference(number: str) -> None:
    ref = body(number)
    types = types_from_resource_list(ref)
    group, _, version = ref["groupVersion"].rpartition("/")
    ours = disc.api_resource_list(types, group, version)
    assert ours is not None
    # We serve status, namespaces/finalize and serviceaccounts/token; drop the others
    # (pods/exec, deployments/scale...).
    expected = dict(ref)
    expected["resources"] = [
        r for r in ref["resources"]
        if "/" not in r["name"] or served_subresource(*r["name"].split("/"))
    ]
    assert dumps(ours) == dumps(expected)


def test_configmap_entry_equals_reference_including_storage_version_hash() -> None:
    (ref,) = [r for r in body("004")["resources"] if r["name"] == "configmaps"]
    ours = disc.api_resource_list([CONFIGMAP], "", "v1")
    assert ours is not None
    assert ours["resources"] == [ref]


def test_unknown_group_version_is_none() -> None:
    assert disc.api_resource_list([CONFIGMAP], "apps", "v1") is None
    assert disc.api_group([CONFIGMAP], "apps") is None


def test_api_group_and_group_list_match_003_006() -> None:
    agg = body("008")
    types = types_from_aggregated(agg)
    assert dumps(disc.api_group(types, "apps")) == dumps(body("006"))
    # Versions in kube order, preferred first: autoscaling v2 > v1, flowcontrol v1beta3 > v1beta2.
    assert dumps(disc.api_group_list(types)) == dumps(body("003"))
    reordered = sorted(types, key=lambda rt: rt.version)  # order of types must not matter
    groups = {g["name"]: g for g in disc.api_group_list(reordered)["groups"]}
    assert groups["autoscaling"]["preferredVersion"]["version"] == "v2"
    assert groups["flowcontrol.apiserver.k8s.io"]["preferredVersion"]["version"] == "v1beta3"


# ---------------------------------------------------------------------------------------------
# Aggregated discovery


@pytest.mark.parametrize(("number", "root"), [("007", "api"), ("008", "apis")])
def test_aggregated_documents_match_reference(number: str, root: disc.Root) -> None:
    ref = body(number)
    ours = disc.aggregated_discovery(types_from_aggregated(ref), root)
    assert dumps(ours) == dumps(only_status_subresources(ref))


def test_aggregated_api_holds_only_core_and_apis_no_core() -> None:
    types = [CONFIGMAP, WIDGET]
    api = disc.aggregated_discovery(types, "api")
    apis = disc.aggregated_discovery(types, "apis")
    assert [i["metadata"] for i in api["items"]] == [{"creationTimestamp": None}]
    assert [i["metadata"] for i in apis["items"]] == [
        {"name": "example.com", "creationTimestamp": None}
    ]


def test_custom_resource_aggregated_entry_names_its_group_version() -> None:
    entry = disc.aggregated_discovery([WIDGET], "apis")["items"][0]["versions"][0]
    (widget,) = entry["resources"]
    gvk = {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert widget["responseKind"] == gvk
    assert widget["subresources"] == [
        {"subresource": "status", "responseKind": gvk, "verbs": ["get", "patch", "update"]}
    ]
    # Same verb order as the CRD's legacy entry (139).
    (ref,) = [r for r in body("139")["resources"] if r["name"] == "widgets"]
    assert widget["verbs"] == ref["verbs"]


# ---------------------------------------------------------------------------------------------
# Negotiation and headers


@pytest.mark.parametrize("number", ["002", "003", "007", "008", "010", "011", "012", "013", "024"])
def test_negotiation_reproduces_reference(number: str) -> None:
    ex = exchange(number)
    resp = ex["response"]
    expected: str | None
    if resp["status"] == 406:
        expected = None
    elif resp["headers"].get("Content-Type") == disc.AGGREGATED_CONTENT_TYPE:
        expected = "aggregated-v2beta1"
    else:
        expected = "legacy"
    assert disc.negotiate_discovery(ex["request"]["headers"].get("Accept")) == expected


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
         "application/json", "aggregated-v2beta1"),  # kubectl 1.28 (kubectl-logs/01)
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
         "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
         "application/json", "aggregated-v2beta1"),  # kubectl 1.32 (kubectl-logs/09)
        ("application/json, */*", "legacy"),
        ("", "legacy"),
        ("application/yaml", "legacy"),
        ("*/*;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
         "aggregated-v2beta1"),
        ("application/vnd.kubernetes.protobuf", None),
        ("text/html", None),
    ],
)
def test_negotiation_of_client_accept_headers(accept: str, expected: str | None) -> None:
    assert disc.negotiate_discovery(accept) == expected


def test_aggregated_response_headers_and_304() -> None:
    ref = exchange("008")
    types = types_from_aggregated(ref["response"]["body"])
    accept = ref["request"]["headers"]["Accept"]
    doc = disc.discovery_response(types, "apis", accept)
    assert doc.status == 200
    for name in ("Cache-Control", "Content-Type", "Vary"):
        assert doc.headers[name] == ref["response"]["headers"][name]
    etag = doc.headers["Etag"]
    assert etag.startswith('"') and etag.endswith('"') and HASH.match(etag.strip('"'))
    assert etag == '"' + hashlib.sha512(doc.body).hexdigest().upper() + '"'
    assert json.loads(doc.body) == disc.aggregated_discovery(types, "apis")

    not_modified = disc.discovery_response(types, "apis", accept, if_none_match=etag)
    ref_304 = exchange("009")["response"]
    assert not_modified.status == ref_304["status"] == 304
    assert not_modified.body == b""
    expected = {k: v for k, v in ref_304["headers"].items() if k in ("Cache-Control", "Vary")}
    assert {k: not_modified.headers[k] for k in expected} == expected
    assert "Content-Type" not in not_modified.headers
    # A stale tag gets the full document again.
    assert disc.discovery_response(types, "apis", accept, if_none_match='"0"').status == 200


def test_legacy_and_406_responses() -> None:
    legacy = disc.discovery_response([CONFIGMAP], "api", "application/json")
    ref_headers = exchange("002")["response"]["headers"]
    assert legacy.status == 200
    assert legacy.headers == {k: ref_headers[k] for k in ("Cache-Control", "Content-Type")}
    assert "Etag" not in legacy.headers
    assert json.loads(legacy.body) == disc.api_versions()
    refused = disc.discovery_response([CONFIGMAP], "apis", exchange("010")["request"]["headers"]
                                      ["Accept"])
    assert refused.status == 406
    assert dumps(json.loads(refused.body)) == dumps(body("010"))
    assert refused.headers["Content-Type"] == "application/json"


# ---------------------------------------------------------------------------------------------
# OpenAPI


@pytest.fixture
def types() -> list[ResourceType]:
    """The core types of the reference (007) plus the Widget CRD."""
    return [*types_from_aggregated(body("007")), WIDGET]


def test_openapi_index_shape_matches_018(types: list[ResourceType]) -> None:
    ref = exchange("018")
    index = oapi.openapi_v3_index(types)
    assert set(index) == set(ref["response"]["body"]) == {"paths"}
    assert "api/v1" in index["paths"] and "apis/example.com/v1" in index["paths"]
    ref_keys = set(ref["response"]["body"]["paths"])
    assert "api/v1" in ref_keys
    for key, value in index["paths"].items():
        url = value["serverRelativeURL"]
        path, _, digest = url.partition("?hash=")
        assert path == f"/openapi/v3/{key}" and HASH.match(digest)
        group, version = oapi.parse_gv_path(key) or ("?", "?")
        assert digest == oapi.openapi_v3_hash(types, group, version)
    response = oapi.openapi_v3_index_response(types)
    assert response.headers["Content-Type"] == ref["response"]["headers"]["Content-Type"]
    assert json.loads(response.body) == index


def test_hashed_document_headers_match_019(types: list[ResourceType]) -> None:
    ref = exchange("019")["response"]
    digest = oapi.openapi_v3_hash(types, "", "v1")
    now = datetime(2026, 12, 2, 14, 15, 48, tzinfo=UTC)
    doc = oapi.openapi_v3_response(types, "api/v1", digest, "application/json", now=now)
    assert doc.status == 200
    for name in ("Cache-Control", "Content-Type", "Vary", "Expires"):
        assert doc.headers[name] == ref["headers"][name], name
    assert doc.headers["Etag"] == f'"{digest}"'
    assert hashlib.sha512(doc.body).hexdigest().upper() == digest
    parsed = json.loads(doc.body)
    assert parsed["openapi"] == ref["body"]["openapi"]
    assert parsed["info"] == ref["body"]["info"]
    again = oapi.openapi_v3_response(types, "api/v1", digest, if_none_match=f'"{digest}"')
    assert again.status == 304 and again.body == b""


def test_stale_hash_redirects_like_020(types: list[ResourceType]) -> None:
    ref = exchange("020")["response"]
    digest = oapi.openapi_v3_hash(types, "", "v1")
    doc = oapi.openapi_v3_response(types, "api/v1", "0123456789ABCDEF", "application/json")
    assert doc.status == ref["status"] == 301
    assert doc.body == b""
    assert doc.headers["Location"] == f"/openapi/v3/api/v1?hash={digest}"
    for name in ("Cache-Control", "Content-Type", "Vary"):
        assert doc.headers[name] == ref["headers"][name]


def test_unhashed_unknown_and_unacceptable_requests(types: list[ResourceType]) -> None:
    plain = oapi.openapi_v3_response(types, "api/v1")
    assert plain.status == 200 and plain.headers["Cache-Control"] == "no-cache, private"
    assert oapi.openapi_v3_response(types, "apis/nope/v1").status == 404
    assert oapi.openapi_v3_response(types, "garbage").status == 404
    assert oapi.openapi_v3_response(types, "api/v1", accept="text/html").status == 406


def patch_supports_field_validation(doc: JSON, group: str, version: str, kind: str) -> bool:
    """What kubectl's queryParamVerifierV3 checks before a Strict create/apply."""
    for item in doc["paths"].values():
        op = item.get("patch")
        if op is None:
            continue
        if op.get("x-kubernetes-group-version-kind") != {
            "group": group, "kind": kind, "version": version
        }:
            continue
        return any(p["name"] == "fieldValidation" and p["in"] == "query"
                   for p in op.get("parameters", []))
    return False


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


@pytest.mark.parametrize(("group", "version"), [("", "v1"), ("example.com", "v1")])
def test_every_kind_declares_field_validation_on_writes(
    group: str, version: str, types: list[ResourceType]
) -> None:
    doc = oapi.openapi_v3_document(types, group, version)
    assert doc is not None
    kinds = {rt.kind for rt in types
             if rt.group == group and rt.version == version and "patch" in rt.verbs}
    assert kinds
    for kind in kinds:
        assert patch_supports_field_validation(doc, group, version, kind), kind
    for item in doc["paths"].values():
        for method in ("post", "put", "patch"):
            if method in item:
                names = [p["name"] for p in item[method]["parameters"]]
                assert "fieldValidation" in names
                # No strategic merge patch in v3: kubectl then uses its built-in types for
                # built-ins and JSON merge patch for custom resources (see _openapi).
                assert "application/strategic-merge-patch+json" not in item[method][
                    "requestBody"]["content"]
    schemas = doc["components"]["schemas"]
    for ref in refs(doc):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref


def test_configmap_paths_and_schema_follow_019(types: list[ResourceType]) -> None:
    ref = body("019")
    doc = oapi.openapi_v3_document(types, "", "v1")
    assert doc is not None
    ours = {p for p in doc["paths"] if "configmaps" in p}
    theirs = {p for p in ref["paths_keys"] if "configmaps" in p and "/watch/" not in p}
    assert ours == theirs
    schema = doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    ref_schema = ref["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    ext = "x-kubernetes-group-version-kind"
    assert schema[ext] == ref_schema[ext]
    for key in ("default", "allOf"):
        assert schema["properties"]["metadata"][key] == ref_schema["properties"]["metadata"][key]
    widget = oapi.openapi_v3_document(types, "example.com", "v1")
    assert widget is not None and "com.example.v1.Widget" in widget["components"]["schemas"]


def test_openapi_v2_protobuf_starts_like_the_real_document() -> None:
    path = REFERENCE / "kubectl-logs" / "03-apply-create.log"
    log = path.read_text()
    first_line = next(line for line in log.splitlines() if line.startswith("00000000"))
    prefix = bytes.fromhex("".join(first_line.split("|")[0].split()[1:]))
    doc = oapi.openapi_v2_response("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert doc.status == 200
    assert doc.headers["Content-Type"] == exchange("021")["response"]["headers"]["Content-Type"]
    assert doc.body[: len(prefix)] == prefix  # swagger "2.0", info {Kubernetes, v1.28.7}
    assert doc.body.endswith(b"\x42\x00")  # empty paths
    as_json = oapi.openapi_v2_response("application/json")
    assert json.loads(as_json.body)["swagger"] == "2.0"


# ---------------------------------------------------------------------------------------------
# Tables and metadata-only views


def at(timestamp: str, plus: float = 0) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")) + timedelta(seconds=plus)


NOW_014 = at("2026-12-02T14:15:43Z")  # ages 66s/73s/87s in 014-016


def configmaps_016() -> list[JSON]:
    return [row["object"] for row in body("016")["rows"]]


def test_configmap_columns_match_014() -> None:
    assert dumps(table.column_definitions(CONFIGMAP)) == dumps(body("014")["columnDefinitions"])


def test_table_list_matches_014_and_016() -> None:
    objects = configmaps_016()
    meta = {"resourceVersion": "229"}
    assert dumps(table.table_for_list(CONFIGMAP, objects, meta, now=NOW_014)) == dumps(
        body("014"))
    assert dumps(table.table_for_list(CONFIGMAP, objects, meta, "Object", now=NOW_014)) == dumps(
        body("016"))
    none = table.table_for_list(CONFIGMAP, objects, meta, "None", now=NOW_014)
    assert [r["object"] for r in none["rows"]] == [None, None, None]


def test_table_for_one_object_matches_015() -> None:
    (obj,) = [o for o in configmaps_016() if o["metadata"]["name"] == "pre-existing"]
    assert dumps(table.table_for_object(CONFIGMAP, obj, now=NOW_014)) == dumps(body("015"))


def test_table_watch_events_match_017() -> None:
    lines = exchange("017")["response"]["lines"]
    for i, line in enumerate(lines):
        (row,) = line["object"]["rows"]
        meta = row["object"]["metadata"]
        obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta, "data": {"a": "1"}}
        seconds = {"0s": 0, "1s": 1}[row["cells"][2]]
        event = table.table_watch_event(CONFIGMAP, line["type"], obj, first=i == 0,
                                        now=at(meta["creationTimestamp"], seconds + 0.5))
        assert dumps(event) == dumps(line)
    assert lines[1]["object"]["columnDefinitions"] is None


def test_watch_error_passes_through() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired"}
    assert table.table_watch_event(CONFIGMAP, "ERROR", status, first=True) == {
        "type": "ERROR", "object": status}


def test_custom_resource_table_matches_150() -> None:
    ref = body("150")
    objects = [{"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": r["object"]["metadata"], "spec": {"size": 1}} for r in ref["rows"]]
    now = at(objects[0]["metadata"]["creationTimestamp"], 1.2)
    ours = table.table_for_list(WIDGET, objects, {"resourceVersion": "372"}, now=now)
    assert dumps(ours) == dumps(ref)


def test_partial_object_metadata_matches_043_044() -> None:
    ref_list = body("043")
    objects = [{"kind": "ConfigMap", "apiVersion": "v1", "metadata": i["metadata"],
                "data": {"k": "v"}} for i in ref_list["items"]]
    ours = table.partial_object_metadata_list(objects, {"resourceVersion": "242"})
    assert dumps(ours) == dumps(ref_list)
    assert dumps(table.partial_object_metadata(objects[0])) == dumps(body("044"))


def test_list_metadata_keeps_paging_fields() -> None:
    meta = {"remainingItemCount": 3, "continue": "tok", "resourceVersion": "9"}
    ours = table.partial_object_metadata_list([], meta)
    assert list(ours["metadata"].items()) == [
        ("resourceVersion", "9"), ("continue", "tok"), ("remainingItemCount", 3)]
    assert table.table_for_list(CONFIGMAP, [], {"resourceVersion": "9", "continue": ""})[
        "metadata"] == {"resourceVersion": "9"}


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_TABLE_ACCEPT, "table"),
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "partial"),
        ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "partial-list"),
        ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
         "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
         "partial-list"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "json"),
        ("application/json", "json"),
        ("application/json, */*", "json"),
        ("*/*", "json"),
        ("", "json"),
        (None, "json"),
        ("application/yaml", "yaml"),
        ("application/vnd.kubernetes.protobuf,application/json", "json"),
        ("application/vnd.kubernetes.protobuf", None),
        ("text/html", None),
        ("application/json;as=Foo;g=meta.k8s.io;v=v1", None),
    ],
)
def test_parse_accept(accept: str | None, expected: str | None) -> None:
    assert table.parse_accept(accept) == expected


def test_reference_accept_headers() -> None:
    for number, expected in [("014", "table"), ("043", "partial-list"), ("044", "partial"),
                             ("124", None), ("026", "json")]:
        accept = exchange(number)["request"]["headers"].get("Accept")
        assert table.parse_accept(accept) == expected, number
    assert dumps(table.not_acceptable_status()) == dumps(body("124"))


def test_representation_mismatch_and_include_object() -> None:
    assert table.representation_mismatch_status("partial", CONFIGMAP, is_list=False) is None
    assert table.representation_mismatch_status("partial-list", CONFIGMAP, is_list=True) is None
    wrong = table.representation_mismatch_status("partial", CONFIGMAP, is_list=True)
    assert wrong is not None and wrong["code"] == 406
    assert "(*v1.ConfigMapList)" in wrong["message"]
    assert table.invalid_include_object("Object") is None
    bad = table.invalid_include_object("Everything")
    assert bad is not None and bad["code"] == 400


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "<invalid>"), (-1, "0s"), (0, "0s"), (66, "66s"), (119, "119s"), (120, "2m"),
     (182, "3m2s"), (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"),
     (4 * 3600 + 600, "4h10m"), (20 * 3600, "20h"), (3 * 86400 + 5 * 3600, "3d5h"),
     (30 * 86400, "30d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y")],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert table.human_duration(seconds) == text


def test_pod_and_deployment_rows() -> None:
    pod_rt = ResourceType(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2026-12-02T14:00:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
                   "containerStatuses": [{"ready": True, "restartCount": 2},
                                         {"ready": False, "restartCount": 1}]},
    }
    now = at("2026-12-02T14:00:05Z")
    t = table.table_for_object(pod_rt, pod, now=now)
    names = [c["name"] for c in t["columnDefinitions"]]
    assert names == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"]
    assert t["rows"][0]["cells"] == ["p", "1/2", "Running", "3", "5s", "10.0.0.1", "n1"]
    dep_rt = ResourceType(group="apps", version="v1", plural="deployments", kind="Deployment",
                          namespaced=True)
    dep = {"metadata": {"name": "d", "creationTimestamp": "2026-12-02T14:00:00Z"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    row = table.table_for_object(dep_rt, dep, now=now)["rows"][0]
    assert row["cells"] == ["d", "2/3", 3, 2, "5s", "c", "nginx", "app=d"]
