"""get/list over HTTP: selectors, paging, resourceVersion semantics, 404s, discovery."""

from __future__ import annotations

import time

from watchkeeper_sim import ApiServer

from .._util import cm

CMS = "/api/v1/namespaces/default/configmaps"


def seed(srv: ApiServer, n: int = 5) -> None:
    for i in range(1, n + 1):
        srv.create_object(cm(f"cm-{i}", labels={"a": "1" if i <= 3 else "2"}, k=f"v{i}"))


async def test_version_health_and_namespaces(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", "/version", user=None)
    assert status == 200 and body["gitVersion"] == "v1.28.7"
    for path in ("/healthz", "/readyz", "/livez"):
        status, body, _ = await req("GET", path, user=None)
        assert (status, body) == (200, "ok")
    status, body, _ = await req("GET", "/api/v1/namespaces")
    assert status == 200 and body["kind"] == "NamespaceList"
    assert [n["metadata"]["name"] for n in body["items"]] == ["default", "kube-public",
                                                              "kube-system"]
    assert all(n["status"]["phase"] == "Active" for n in body["items"])


async def test_get_and_list_shapes(apiserver: ApiServer, req) -> None:
    seed(apiserver)
    status, body, headers = await req("GET", f"{CMS}/cm-1")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert body["kind"] == "ConfigMap" and body["apiVersion"] == "v1"
    meta = body["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and "generation" not in meta
    status, body, _ = await req("GET", CMS)
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == str(apiserver.store.rv)
    assert [i["metadata"]["name"] for i in body["items"]] == [f"cm-{i}" for i in range(1, 6)]
    assert "kind" not in body["items"][0]  # like the apiserver: list items carry no kind


async def test_all_namespaces_and_cluster_scoped(apiserver: ApiServer, req) -> None:
    apiserver.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "o"}})
    apiserver.create_object(cm("x", ns="o"))
    apiserver.create_object(cm("y"))
    _, body, _ = await req("GET", "/api/v1/configmaps")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]] == [
        ("default", "y"), ("o", "x")]
    status, _, _ = await req("GET", "/api/v1/namespaces/default/namespaces")
    assert status == 404
    status, body, _ = await req("GET", "/api/v1/namespaces/o")
    assert status == 200 and body["kind"] == "Namespace"


async def test_label_and_field_selectors(apiserver: ApiServer, req) -> None:
    seed(apiserver)
    names = lambda b: [i["metadata"]["name"] for i in b["items"]]  # noqa: E731
    _, body, _ = await req("GET", CMS, params={"labelSelector": "a=2"})
    assert names(body) == ["cm-4", "cm-5"]
    _, body, _ = await req("GET", CMS, params={"labelSelector": "a!=2"})
    assert names(body) == ["cm-1", "cm-2", "cm-3"]
    _, body, _ = await req("GET", CMS, params={"labelSelector": "a in (2),!b"})
    assert names(body) == ["cm-4", "cm-5"]
    _, body, _ = await req("GET", CMS, params={"fieldSelector": "metadata.name=cm-3"})
    assert names(body) == ["cm-3"]
    _, body, _ = await req("GET", CMS, params={"fieldSelector": "metadata.name!=cm-3",
                                               "labelSelector": "a=1"})
    assert names(body) == ["cm-1", "cm-2"]
    status, body, _ = await req("GET", CMS, params={"fieldSelector": "data.k=v1"})
    assert status == 400 and body["reason"] == "BadRequest"
    status, body, _ = await req("GET", CMS, params={"labelSelector": "a in (1"})
    assert status == 400
    assert body["message"] == "unable to parse requirement: found '', expected: ',' or ')'"


async def test_paging_with_continue(apiserver: ApiServer, req) -> None:
    seed(apiserver)
    rv = str(apiserver.store.rv)
    _, p1, _ = await req("GET", CMS, params={"limit": "2"})
    assert p1["metadata"]["remainingItemCount"] == 3 and p1["metadata"]["resourceVersion"] == rv
    apiserver.create_object(cm("cm-25"))  # after the snapshot: not in this paged list
    apiserver.delete_object("v1", "ConfigMap", "cm-3")  # deleted later: still in the list
    _, p2, _ = await req("GET", CMS, params={"limit": "2", "continue": p1["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in p2["items"]] == ["cm-3", "cm-4"]
    assert p2["metadata"]["resourceVersion"] == rv and p2["metadata"]["remainingItemCount"] == 1
    _, p3, _ = await req("GET", CMS, params={"limit": "2", "continue": p2["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in p3["items"]] == ["cm-5"]
    assert "continue" not in p3["metadata"] and "remainingItemCount" not in p3["metadata"]


async def test_continue_errors(apiserver: ApiServer, req) -> None:
    seed(apiserver)
    _, p1, _ = await req("GET", CMS, params={"limit": "2"})
    token = p1["metadata"]["continue"]
    status, body, _ = await req("GET", CMS, params={"limit": "2", "continue": "not-a-valid-token"})
    assert status == 400 and body["message"].startswith("invalid continue token")
    status, body, _ = await req("GET", CMS, params={"continue": token, "resourceVersion": "3"})
    assert (status, body["message"]) == (
        400, "specifying resource version is not allowed when using continue")
    apiserver.create_object(cm("cm-0"))
    apiserver.compact()
    status, body, _ = await req("GET", CMS, params={"limit": "2", "continue": token})
    assert status == 410 and body["reason"] == "Expired"
    fresh = body["metadata"]["continue"]
    status, body, _ = await req("GET", CMS, params={"limit": "2", "continue": fresh})
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["cm-3", "cm-4"]
    assert body["metadata"]["resourceVersion"] == str(apiserver.store.rv)


async def test_resource_version_semantics(apiserver: ApiServer, req) -> None:
    seed(apiserver)
    old_rv = str(apiserver.store.rv)
    apiserver.delete_object("v1", "ConfigMap", "cm-1")
    _, body, _ = await req("GET", CMS, params={"resourceVersion": "0", "limit": "2"})
    assert len(body["items"]) == 4 and "continue" not in body["metadata"]
    _, body, _ = await req("GET", CMS, params={"resourceVersion": old_rv,
                                               "resourceVersionMatch": "Exact"})
    assert len(body["items"]) == 5 and body["metadata"]["resourceVersion"] == old_rv
    _, body, _ = await req("GET", CMS, params={"resourceVersion": old_rv,
                                               "resourceVersionMatch": "NotOlderThan"})
    assert len(body["items"]) == 4
    _, body, _ = await req("GET", CMS, params={"resourceVersion": old_rv})
    assert len(body["items"]) == 4
    apiserver.compact()
    status, body, _ = await req("GET", CMS, params={"resourceVersion": old_rv,
                                                    "resourceVersionMatch": "Exact"})
    assert (status, body["message"]) == (
        410, "The resourceVersion for the provided list is too old.")
    status, body, _ = await req("GET", CMS, params={"resourceVersionMatch": "Exact"})
    assert status == 422 and body["details"]["kind"] == "ListOptions"
    status, body, _ = await req("GET", CMS, params={"resourceVersion": "0",
                                                    "resourceVersionMatch": "Exact"})
    assert status == 422
    status, body, _ = await req("GET", CMS, params={"sendInitialEvents": "true"})
    assert status == 422


async def test_future_resource_version_waits_then_504(apiserver: ApiServer, req) -> None:
    t0 = time.monotonic()
    status, body, headers = await req("GET", CMS, params={"resourceVersion": "99999",
                                                          "resourceVersionMatch": "NotOlderThan"})
    assert status == 504 and headers["Retry-After"] == "1"
    assert body["reason"] == "Timeout" and body["details"]["retryAfterSeconds"] == 1
    assert body["message"].startswith("Timeout: Too large resource version: 99999, current: ")
    assert time.monotonic() - t0 >= 0.15


async def test_not_found_shapes(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", f"{CMS}/missing")
    assert status == 404 and body["details"] == {"name": "missing", "kind": "configmaps"}
    status, body, _ = await req("GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert body["message"] == 'deployments.apps "nope" not found'
    assert body["details"]["group"] == "apps"
    for path in ("/api/v1/namespaces/default/widgets", "/apis/apps/v9/deployments",
                 "/apis/apps/v1/namespaces/default/widgets"):
        status, body, headers = await req("GET", path)
        assert status == 404 and body["message"] == (
            "the server could not find the requested resource")
    status, body, headers = await req("GET", "/apis/nope.example.com/v1/widgets")
    assert status == 404 and body == "404 page not found\n"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    status, body, _ = await req("PUT", CMS, json=cm("x"))
    assert status == 405 and body["reason"] == "MethodNotAllowed"


async def test_legacy_discovery(apiserver: ApiServer, req) -> None:
    _, body, _ = await req("GET", "/api")
    assert body["versions"] == ["v1"]
    _, body, _ = await req("GET", "/apis")
    assert "apps" in [g["name"] for g in body["groups"]]
    _, body, _ = await req("GET", "/api/v1")
    names = [r["name"] for r in body["resources"]]
    assert "configmaps" in names and "pods/status" in names
    _, body, _ = await req("GET", "/apis/apps/v1")
    assert body["groupVersion"] == "apps/v1"
    _, body, _ = await req("GET", "/apis/apps")
    assert body["preferredVersion"]["version"] == "v1"
