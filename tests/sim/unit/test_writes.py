"""Writes over HTTP: create/update/patch/apply/delete, status, generation, finalizers."""

from __future__ import annotations

from typing import Any

import aiohttp

from watchkeeper_sim import ApiServer

from .._util import cm, open_watch

CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str = "d", replicas: int = 1) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
            "status": {"replicas": 7}}


async def test_create_assigns_metadata(apiserver: ApiServer, req) -> None:
    rv = apiserver.store.rv
    status, body, _ = await req("POST", CMS, json=cm("a"), headers={"User-Agent": "curl/8"})
    assert status == 201
    meta = body["metadata"]
    assert meta["resourceVersion"] == str(rv + 1) and len(meta["uid"]) == 36
    assert meta["managedFields"][0]["manager"] == "curl"
    assert meta["managedFields"][0]["fieldsV1"] == {"f:data": {".": {}, "f:k": {}}}
    status, body, _ = await req("POST", CMS, json=cm("a"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "a" already exists'
    status, body, _ = await req("POST", CMS, json={"metadata": {"generateName": "gen-"}})
    assert status == 201 and body["metadata"]["name"].startswith("gen-")
    assert len(body["metadata"]["name"]) == 9
    status, body, _ = await req("POST", CMS, params={"fieldManager": "mine"}, json=cm("b"))
    assert body["metadata"]["managedFields"][0]["manager"] == "mine"


async def test_create_validation(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("POST", CMS, json=cm("Bad_Name"))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid')
    status, body, _ = await req("POST", "/api/v1/namespaces/nope/configmaps",
                                json=cm("x", ns="nope"))
    assert status == 404 and body["message"] == 'namespaces "nope" not found'
    status, body, _ = await req("POST", CMS, json=cm("x", ns="kube-system"))
    assert status == 400 and body["message"].startswith("the namespace of the provided object")
    status, body, _ = await req("POST", CMS, json={"apiVersion": "v1", "kind": "Secret",
                                                   "metadata": {"name": "x"}})
    assert status == 400 and body["message"].startswith(
        'Secret in version "v1" cannot be handled as a ConfigMap')
    status, body, _ = await req("POST", CMS, data=b'{"apiVersion":"v1","kind":"ConfigMap"',
                                headers={"Content-Type": "application/json"})
    assert status == 400 and "json parse error" in body["message"]
    status, body, _ = await req("POST", CMS, data=b"{}",
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    status, body, _ = await req("POST", CMS, data=b"x" * (3 * 1024 * 1024 + 10),
                                headers={"Content-Type": "application/json"})
    assert status == 413 and body["kind"] == "Status"
    status, _, _ = await req("GET", "/version")  # still serving
    assert status == 200


async def test_yaml_create_and_dry_run(apiserver: ApiServer, req) -> None:
    yml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: b\n"
    status, body, _ = await req("POST", CMS, data=yml,
                                headers={"Content-Type": "application/yaml"})
    assert status == 201 and body["data"] == {"a": "b"}
    rv = apiserver.store.rv
    status, body, _ = await req("POST", CMS, params={"dryRun": "All"}, json=cm("dry"))
    assert status == 201 and body["metadata"]["uid"] and "resourceVersion" not in body["metadata"]
    assert apiserver.store.rv == rv
    status, _, _ = await req("GET", f"{CMS}/dry")
    assert status == 404


async def test_update_conflicts_and_mismatches(apiserver: ApiServer, req) -> None:
    obj = apiserver.create_object(cm("a"))
    fresh = dict(obj, data={"k": "2"})
    status, body, _ = await req("PUT", f"{CMS}/a", json=fresh)
    assert status == 200 and body["data"] == {"k": "2"}
    status, body, _ = await req("PUT", f"{CMS}/a", json=dict(obj, data={"k": "3"}))
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "a": the object has '
                               "been modified; please apply your changes to the latest version "
                               "and try again")
    unconditional = cm("a", k="4")
    status, body, _ = await req("PUT", f"{CMS}/a", json=unconditional)
    assert status == 200 and body["metadata"]["uid"] == obj["metadata"]["uid"]
    status, body, _ = await req("PUT", f"{CMS}/missing", json=cm("missing"))
    assert status == 404
    status, body, _ = await req("PUT", f"{CMS}/a", json=cm("other"))
    assert status == 400 and body["message"] == (
        "the name of the object (other) does not match the name on the URL (a)")


async def test_noop_update_keeps_resource_version(apiserver: ApiServer, req) -> None:
    obj = apiserver.create_object(cm("a"))
    status, body, _ = await req("PUT", f"{CMS}/a", json=obj)
    assert status == 200
    assert body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


async def test_generation_and_status_subresource(apiserver: ApiServer, req) -> None:
    status, d, _ = await req("POST", DEPLOYS, json=deployment())
    assert status == 201 and d["metadata"]["generation"] == 1 and "status" not in d
    d["metadata"]["labels"] = {"x": "y"}
    status, d, _ = await req("PUT", f"{DEPLOYS}/d", json=d)
    assert d["metadata"]["generation"] == 1  # metadata only
    d["spec"]["replicas"] = 3
    d["status"] = {"replicas": 99}
    status, d, _ = await req("PUT", f"{DEPLOYS}/d", json=d)
    assert d["metadata"]["generation"] == 2 and "status" not in d  # status ignored on main
    d["status"] = {"replicas": 3}
    d["spec"]["replicas"] = 50
    d["metadata"]["labels"] = {"x": "changed"}
    status, s, _ = await req("PUT", f"{DEPLOYS}/d/status", json=d)
    assert status == 200 and s["status"] == {"replicas": 3}
    assert s["spec"]["replicas"] == 3 and s["metadata"]["labels"] == {"x": "y"}
    assert s["metadata"]["generation"] == 2
    status, s, _ = await req("PATCH", f"{DEPLOYS}/d/status", json={"status": {"ready": 1}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert s["status"] == {"replicas": 3, "ready": 1}
    sub = [m for m in s["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert sub
    status, _, _ = await req("GET", "/api/v1/namespaces/default/configmaps/x/status")
    assert status == 404


async def test_patch_types(apiserver: ApiServer, req) -> None:
    apiserver.create_object(cm("p", a="1", b="2"))
    merge = {"Content-Type": "application/merge-patch+json"}
    status, body, _ = await req("PATCH", f"{CMS}/p", json={"data": {"c": "3", "b": None}},
                                headers=merge)
    assert status == 200 and body["data"] == {"a": "1", "c": "3"}
    jp = {"Content-Type": "application/json-patch+json"}
    status, body, _ = await req("PATCH", f"{CMS}/p", headers=jp, json=[
        {"op": "add", "path": "/data/d", "value": "4"},
        {"op": "replace", "path": "/data/a", "value": "jp"}])
    assert body["data"] == {"a": "jp", "c": "3", "d": "4"}
    for ops in ([{"op": "test", "path": "/data/a", "value": "no"}],
                [{"op": "remove", "path": "/data/zzz"}]):
        status, body, _ = await req("PATCH", f"{CMS}/p", headers=jp, json=ops)
        assert status == 422 and body["message"] == (
            "the server rejected our request due to an error in our request")
    smp = {"Content-Type": "application/strategic-merge-patch+json"}
    status, body, _ = await req("PATCH", f"{CMS}/p", headers=smp,
                                json={"metadata": {"labels": {"smp": "yes"}}})
    assert status == 200 and body["metadata"]["labels"] == {"smp": "yes"}
    for ct in ("application/json", "text/plain"):
        status, body, _ = await req("PATCH", f"{CMS}/p", data=b"{}", headers={"Content-Type": ct})
        assert status == 415 and body["message"] == "415: Unsupported Media Type"
    status, body, _ = await req("PATCH", f"{CMS}/missing", json={}, headers=merge)
    assert status == 404
    stale = {"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}}
    status, body, _ = await req("PATCH", f"{CMS}/p", json=stale, headers=merge)
    assert status == 409


async def test_strategic_merge_containers_by_name(apiserver: ApiServer, req) -> None:
    d = deployment()
    d["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "s:1"})
    apiserver.create_object(d)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:2"}]}}}}
    status, body, _ = await req("PATCH", f"{DEPLOYS}/d", json=patch,
                                headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 200
    assert body["spec"]["template"]["spec"]["containers"] == [
        {"name": "c", "image": "i:2"}, {"name": "side", "image": "s:1"}]
    assert body["metadata"]["generation"] == 2


async def test_server_side_apply(apiserver: ApiServer, req) -> None:
    ct = {"Content-Type": "application/apply-patch+yaml"}
    yml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  owned: by-a\n"
    status, body, _ = await req("PATCH", f"{CMS}/ssa", data=yml, headers=ct)
    assert status == 422 and body["details"]["kind"] == "PatchOptions"
    status, body, _ = await req("PATCH", f"{CMS}/ssa", data=yml, headers=ct,
                                params={"fieldManager": "a"})
    assert status == 201
    assert body["metadata"]["managedFields"] == [{
        "manager": "a", "operation": "Apply", "apiVersion": "v1",
        "time": body["metadata"]["managedFields"][0]["time"], "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:owned": {}}}}]
    other = yml.replace(b"by-a", b"by-b")
    status, body, _ = await req("PATCH", f"{CMS}/ssa", data=other, headers=ct,
                                params={"fieldManager": "b"})
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "a": .data.owned'
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                          "message": 'conflict with "a"', "field": ".data.owned"}]
    status, body, _ = await req("PATCH", f"{CMS}/ssa", data=other, headers=ct,
                                params={"fieldManager": "b", "force": "true"})
    assert status == 200 and body["data"] == {"owned": "by-b"}
    assert [m["manager"] for m in body["metadata"]["managedFields"]] == ["b"]
    status, body, _ = await req("PATCH", f"{CMS}/ssa", headers=ct, params={"fieldManager": "b"},
                                json={"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "ssa"},
                                      "data": {"owned": "by-b", "json": "yes"}})
    assert status == 200 and body["data"] == {"owned": "by-b", "json": "yes"}


async def test_delete_shapes_and_preconditions(apiserver: ApiServer, req) -> None:
    obj = apiserver.create_object(cm("a"))
    status, body, _ = await req("DELETE", f"{CMS}/a", json={
        "kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    assert status == 409 and body["details"] == {"name": "a", "kind": "ConfigMap"}
    status, body, _ = await req("DELETE", f"{CMS}/a", json={"preconditions": {
        "resourceVersion": "1"}})
    assert status == 409 and "the ResourceVersion in the precondition (1)" in body["message"]
    status, body, _ = await req("DELETE", f"{CMS}/a")
    assert status == 200 and body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": obj["metadata"]["uid"]}}
    status, body, _ = await req("DELETE", f"{CMS}/a")
    assert status == 404


async def test_delete_collection(apiserver: ApiServer, req) -> None:
    for i in range(3):
        apiserver.create_object(cm(f"c{i}", labels={"coll": "yes"}))
    apiserver.create_object(cm("keep"))
    status, body, _ = await req("DELETE", CMS, params={"labelSelector": "coll=yes"})
    assert status == 200 and body["kind"] == "ConfigMapList" and len(body["items"]) == 3
    _, body, _ = await req("GET", CMS)
    assert [i["metadata"]["name"] for i in body["items"]] == ["keep"]


async def test_finalizer_lifecycle(apiserver: ApiServer, req,
                                   session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv,
                         timeoutSeconds=2)
    held = cm("held")
    held["metadata"]["finalizers"] = ["example.com/f"]
    status, _, _ = await req("POST", CMS, json=held)
    assert status == 201
    status, body, _ = await req("DELETE", f"{CMS}/held")
    assert status == 200 and body["kind"] == "ConfigMap"
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    again_status, again, _ = await req("DELETE", f"{CMS}/held")
    assert again_status == 200 and again == body
    merge = {"Content-Type": "application/merge-patch+json"}
    status, bad, _ = await req("PATCH", f"{CMS}/held", headers=merge, json={
        "metadata": {"finalizers": ["example.com/f", "example.com/g"]}})
    assert status == 422 and "no new finalizers can be added" in bad["message"]
    status, upd, _ = await req("PATCH", f"{CMS}/held", headers=merge, json={"data": {"k": "v2"}})
    assert status == 200
    status, gone, _ = await req("PATCH", f"{CMS}/held", headers=merge,
                                json={"metadata": {"finalizers": None}})
    assert status == 200 and "finalizers" not in gone["metadata"]
    assert gone["metadata"]["resourceVersion"] == upd["metadata"]["resourceVersion"]
    status, _, _ = await req("GET", f"{CMS}/held")
    assert status == 404
    events = [await w.next() for _ in range(4)]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert events[3]["object"]["metadata"]["finalizers"] == ["example.com/f"]
    w.close()


async def test_propagation_policies(session: aiohttp.ClientSession) -> None:
    # Without a garbage collector (like the reference's run 1) the finalizers stay; with one
    # (the default) they go within milliseconds, which would race the third DELETE.
    async with ApiServer(garbage_collector=False) as srv:
        srv.create_object(cm("fg"))
        srv.create_object(cm("orph"))
        headers = {"Authorization": f"Bearer {srv.token()}"}

        async def delete(name: str, **kw: Any) -> tuple[int, Any]:
            async with session.delete(f"{srv.url}{CMS}/{name}", headers=headers, **kw) as r:
                return r.status, await r.json()

        status, body = await delete("fg", json={"propagationPolicy": "Foreground"})
        assert status == 200 and body["metadata"]["finalizers"] == ["foregroundDeletion"]
        status, body = await delete("orph", params={"propagationPolicy": "Orphan"})
        assert body["metadata"]["finalizers"] == ["orphan"]
        status, body = await delete("orph", json={"propagationPolicy": "Background"})
        assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]


async def test_namespace_deletion(apiserver: ApiServer, req) -> None:
    apiserver.create_object({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "doomed"}})
    apiserver.create_object(cm("x", ns="doomed"))
    status, body, _ = await req("DELETE", "/api/v1/namespaces/doomed")
    assert status == 200 and body["status"]["phase"] == "Terminating"
    status, body, _ = await req("POST", "/api/v1/namespaces/doomed/configmaps",
                                json=cm("late", ns="doomed"))
    assert status == 403 and "because it is being terminated" in body["message"]
    import asyncio

    for _ in range(50):
        status, _, _ = await req("GET", "/api/v1/namespaces/doomed")
        if status == 404:
            break
        await asyncio.sleep(0.02)
    assert status == 404
    status, _, _ = await req("GET", "/api/v1/namespaces/doomed/configmaps/x")
    assert status == 404


async def test_dependents_are_collected_after_sweeps_that_found_none() -> None:
    """Removals sweep only while some object has owners: one made later must still go
    with its owner (the collector's notice on owner references, not on removal)."""
    import asyncio

    async with ApiServer() as srv:
        owner = srv.create_object(cm("owner"))
        srv.create_object(cm("unrelated"))
        srv.delete_object("v1", "ConfigMap", "unrelated", namespace="default")
        await asyncio.sleep(0.1)  # a sweep that found no dependents
        child = cm("child")
        child["metadata"]["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner["metadata"]["uid"]}]
        srv.create_object(child)
        srv.delete_object("v1", "ConfigMap", "owner", namespace="default")
        rt = srv.resource("v1", "configmaps")
        async with asyncio.timeout(5):
            while srv.store.peek(rt, "default", "child") is not None:
                await asyncio.sleep(0.02)
