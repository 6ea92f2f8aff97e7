"""Discovery and OpenAPI over HTTP: negotiation, Etag/304, 406, 301 and the two kinds of 404.

The documents' contents are checked in test_discovery_docs.py; these tests check that the
server routes each path to them and sends their status and headers unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from watchkeeper_sim import ApiServer

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"  # in the repo
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
KUBECTL_DISCOVERY = f"{AGGREGATED},application/json"
V2_ONLY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object"}}}],
    },
}


def reference_body(number: str) -> Any:
    (path,) = REFERENCE.glob(f"{number}-*.json")
    return json.loads(path.read_text())["response"]["body"]


# ---- discovery -------------------------------------------------------------------------------


async def test_aggregated_discovery_etag_and_304(apiserver: ApiServer, req) -> None:
    for root, first_group in (("/api", None), ("/apis", "apps")):
        status, body, headers = await req("GET", root, headers={"Accept": KUBECTL_DISCOVERY})
        assert status == 200
        assert headers["Content-Type"] == AGGREGATED
        assert headers["Cache-Control"] == "public" and headers["Vary"] == "Accept"
        assert body["kind"] == "APIGroupDiscoveryList"
        names = [i["metadata"].get("name") for i in body["items"]]
        assert (names == [None]) if first_group is None else (first_group in names)
        etag = headers["Etag"]
        status, text, headers = await req(
            "GET", root, headers={"Accept": KUBECTL_DISCOVERY, "If-None-Match": etag})
        assert status == 304 and text == ""
        assert headers["Etag"] == etag and "Content-Type" not in headers


async def test_aggregated_etag_changes_with_a_crd(apiserver: ApiServer, req) -> None:
    _, _, headers = await req("GET", "/apis", headers={"Accept": KUBECTL_DISCOVERY})
    old = headers["Etag"]
    apiserver.create_object(CRD)
    status, body, headers = await req(
        "GET", "/apis", headers={"Accept": KUBECTL_DISCOVERY, "If-None-Match": old})
    assert status == 200 and headers["Etag"] != old
    assert "example.com" in [i["metadata"]["name"] for i in body["items"]]
    status, body, _ = await req("GET", "/apis/example.com/v1")
    assert status == 200
    assert [r["name"] for r in body["resources"]] == ["widgets", "widgets/status"]


async def test_discovery_negotiation(apiserver: ApiServer, req) -> None:
    status, body, headers = await req("GET", "/apis", headers={"Accept": V2_ONLY})
    assert status == 406 and body == reference_body("010")
    status, body, headers = await req("GET", "/api", headers={"Accept": V2_ONLY})
    assert status == 406 and body["reason"] == "NotAcceptable"
    status, body, headers = await req(
        "GET", "/apis", headers={"Accept": f"{V2_ONLY},application/json"})
    assert status == 200 and body["kind"] == "APIGroupList"  # 011: legacy fallback
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-cache, private" and "Etag" not in headers
    status, body, _ = await req("GET", "/api")
    assert status == 200 and body["kind"] == "APIVersions"
    assert body["serverAddressByClientCIDRs"][0]["serverAddress"] == (
        f"{apiserver.host}:{apiserver.port}")


async def test_legacy_group_documents(apiserver: ApiServer, req) -> None:
    status, body, headers = await req("GET", "/api/v1")
    assert status == 200 and headers["Cache-Control"] == "no-cache, private"
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["configmaps"]["storageVersionHash"] == "qFsyl6wFWjQ="  # as in 004
    assert "deletecollection" not in by_name["namespaces"]["verbs"]  # 004
    assert "deletecollection" in by_name["configmaps"]["verbs"]
    status, body, _ = await req("GET", "/apis/apps/")
    assert status == 200 and body["kind"] == "APIGroup"
    assert body["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}


@pytest.mark.parametrize("path", ["/apis/apps/v9", "/apis/apps/v9/deployments"])
async def test_unknown_version_of_known_group_is_json_404(apiserver: ApiServer, req,
                                                         path: str) -> None:
    status, body, _ = await req("GET", path)
    assert status == 404 and body == reference_body("084")


@pytest.mark.parametrize("path", ["/apis/nope.example.com", "/apis/nope.example.com/v1",
                                  "/api/v2", "/apis/nope.example.com/v1/widgets"])
async def test_unknown_group_is_plain_text_404(apiserver: ApiServer, req,
                                               path: str) -> None:
    status, body, headers = await req("GET", path)
    assert status == 404 and body == "404 page not found\n"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"


async def test_discovery_needs_an_authenticated_user(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", "/apis", user=None)
    assert status == 403 and body["reason"] == "Forbidden"
    status, _, _ = await req("GET", "/openapi/v3", user=None)
    assert status == 403
    status, _, _ = await req("GET", "/openapi/v3", user="limited")
    assert status == 200


# ---- OpenAPI ---------------------------------------------------------------------------------


async def test_openapi_v3_index_and_hashed_documents(apiserver: ApiServer, req) -> None:
    status, text, headers = await req("GET", "/openapi/v3")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"  # 018
    index = json.loads(text)["paths"]
    assert {"api/v1", "apis/apps/v1"} <= set(index)
    url = index["api/v1"]["serverRelativeURL"]
    status, doc, headers = await req("GET", url)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "public, immutable" and "Expires" in headers
    post = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"]
    assert "fieldValidation" in [p["name"] for p in post["parameters"]]
    etag = headers["Etag"]
    status, text, _ = await req("GET", url, headers={"If-None-Match": etag})
    assert status == 304 and text == ""


async def test_openapi_v3_stale_hash_redirects(apiserver: ApiServer, req) -> None:
    status, _, headers = await req("GET", "/openapi/v3/api/v1?hash=0123456789ABCDEF",
                                   allow_redirects=False)
    assert status == 301  # 020
    current = headers["Location"]
    assert current.startswith("/openapi/v3/api/v1?hash=") and "0123456789ABCDEF" not in current
    status, _, headers = await req("GET", "/openapi/v3/api/v1")
    assert status == 200 and headers["Cache-Control"] == "no-cache, private"


async def test_openapi_v3_errors(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", "/openapi/v3/apis/nope.example.com/v1")
    assert status == 404 and body == "404 page not found\n"
    status, _, _ = await req("GET", "/openapi/v3/api/v1", headers={"Accept": "text/html"})
    assert status == 406


async def test_openapi_v3_follows_crds(apiserver: ApiServer, req) -> None:
    _, text, _ = await req("GET", "/openapi/v3")
    assert "apis/example.com/v1" not in json.loads(text)["paths"]
    apiserver.create_object(CRD)
    _, text, _ = await req("GET", "/openapi/v3")
    url = json.loads(text)["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    status, doc, _ = await req("GET", url)
    assert status == 200
    assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}" in doc["paths"]


async def test_openapi_v2(apiserver: ApiServer, req) -> None:
    status, _, headers = await req("GET", "/openapi/v2", headers={"Accept": V2_PROTOBUF})
    assert status == 200  # 021: kubectl 1.28 needs it before apply
    assert headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    status, body, headers = await req("GET", "/openapi/v2")
    assert status == 200 and body["swagger"] == "2.0"


# ---- verbs the real server does not have -----------------------------------------------------


async def test_namespaces_have_no_deletecollection(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("DELETE", "/api/v1/namespaces")
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    status, body, _ = await req("GET", "/api/v1/namespaces/default")
    assert status == 200 and "deletionTimestamp" not in body["metadata"]
