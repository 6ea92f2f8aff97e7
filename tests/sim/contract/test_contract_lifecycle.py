"""Contract tests for the deletion lifecycle: delete options (reference files 119-123),
finalizers (156-164), propagation policies (165-167), namespace deletion (168-171) and
owner-reference garbage collection (172, 173), each replayed against the simulator with
the state the capture needed built first, and held to the real kube-apiserver 1.28 answer.

Run 1 of the pack (119-167) had no kube-controller-manager, so those tests use
``ApiServer(garbage_collector=False)``; run 2 (168-173) had the namespace controller and the
garbage collector, which the simulator runs promptly (the capture's delays are noted)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer
from watchkeeper_sim.storage.store import StoreError

from .._util import cm, open_watch
from .test_contract import assert_same_status, ctype, load, norm, replay

World = tuple[ApiServer, aiohttp.ClientSession]


async def _world(**options: Any) -> AsyncIterator[World]:
    # curl's User-Agent, as in the capture: managedFields name the manager "curl"
    async with ApiServer(bookmark_interval=0.2, bookmark_lead=0.1, **options) as srv, \
            aiohttp.ClientSession(headers={"User-Agent": "curl/7.88.1"}) as session:
        for ns in ("errors", "fin", "doomed"):
            async with session.post(srv.url + "/api/v1/namespaces",
                                    json={"metadata": {"name": ns}},
                                    headers={"Authorization": f"Bearer {srv.token()}"}) as r:
                assert r.status == 201
        yield srv, session


@pytest.fixture
async def run1() -> AsyncIterator[World]:
    """Like the pack's run 1: an apiserver without kube-controller-manager's collector."""
    async for world in _world(garbage_collector=False):
        yield world


@pytest.fixture
async def run2() -> AsyncIterator[World]:
    """Like run 2: namespace controller and garbage collector running."""
    async for world in _world():
        yield world


def managed(obj: dict[str, Any]) -> list[tuple[Any, ...]]:
    """managedFields without their times, uids in field keys normalised."""
    return [(e.get("manager"), e.get("operation"), e.get("apiVersion"), e.get("subresource"),
             norm(json.dumps(e.get("fieldsV1"), sort_keys=True)))
            for e in obj["metadata"].get("managedFields") or []]


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in (obj.get("status") or {}).get("conditions") or []]


def assert_same_object(got: dict[str, Any], want: dict[str, Any]) -> None:
    """The fields of the deletion lifecycle, key order included (uids/times/RVs aside)."""
    assert list(got) == list(want), (list(got), list(want))
    gm, wm = got["metadata"], want["metadata"]
    assert list(gm) == list(wm), (list(gm), list(wm))
    for key in ("name", "namespace", "deletionGracePeriodSeconds", "finalizers", "labels"):
        assert gm.get(key) == wm.get(key), key
    assert ("deletionTimestamp" in gm) == ("deletionTimestamp" in wm)
    assert norm(json.dumps(gm.get("ownerReferences"))) == norm(
        json.dumps(wm.get("ownerReferences")))
    for key in ("data", "spec"):
        assert got.get(key) == want.get(key), key
    assert (got.get("status") or {}).get("phase") == (want.get("status") or {}).get("phase")
    assert conditions(got) == conditions(want)
    assert managed(got) == managed(want)


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def test_119_120_delete_then_missing(run1: World) -> None:
    srv, session = run1
    made = srv.create_object(cm("ssa-made", ns="errors"))
    ref = load(119)
    status, body, headers = await replay(srv, session, ref)
    want = ref["response"]["body"]
    assert status == 200 and ctype(headers) == "application/json"
    assert body == want | {"details": want["details"] | {"uid": made["metadata"]["uid"]}}
    ref = load(120)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body == ref["response"]["body"]


@pytest.mark.parametrize("number", [121, 122])
async def test_121_122_failed_preconditions(run1: World, number: int) -> None:
    srv, session = run1
    target = srv.create_object(cm("target", ns="errors"))
    ref = load(number)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]
    if number == 121:
        assert target["metadata"]["uid"] in body["message"]
    else:
        assert f"in record ({target['metadata']['resourceVersion']})" in body["message"]
    assert srv.get_object("v1", "ConfigMap", "target", namespace="errors")  # nothing was deleted
    pre = {"uid": target["metadata"]["uid"],
           "resourceVersion": target["metadata"]["resourceVersion"]}
    status, body, _ = await replay(srv, session, ref, body={"kind": "DeleteOptions",
                                                            "apiVersion": "v1",
                                                            "preconditions": pre})
    assert status == 200 and body["status"] == "Success"


async def test_123_delete_collection(run1: World) -> None:
    srv, session = run1
    made = [srv.create_object(cm(f"coll-{i}", ns="errors", labels={"coll": "yes"}))
            for i in range(3)]
    srv.create_object(cm("bystander", ns="errors", labels={"coll": "no"}))
    listed_at = srv.store.rv
    ref = load(123)
    status, body, headers = await replay(srv, session, ref)
    want = ref["response"]["body"]
    assert status == 200 and ctype(headers) == "application/json"
    assert list(body) == list(want) and body["kind"] == want["kind"]
    # the list the deletions were made from: its RV is the one before the deletions
    assert body["metadata"] == {"resourceVersion": str(listed_at)}
    assert [i["metadata"]["name"] for i in body["items"]] == ["coll-0", "coll-1", "coll-2"]
    for got, exp, obj in zip(body["items"], want["items"], made, strict=True):
        assert list(got["metadata"]) == list(exp["metadata"])
        assert got["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert srv.store.rv == listed_at + 3
    names = [o["metadata"]["name"] for o in srv.store.objects(srv.resource("v1", "ConfigMap"),
                                                               "errors")]
    assert names == ["bystander"]


async def test_156_to_164_finalizer_lifecycle(run1: World) -> None:
    srv, session = run1
    start = srv.store.rv
    query = (f"watch=1&allowWatchBookmarks=true&resourceVersion={start}&timeoutSeconds=1.5")
    watch = asyncio.create_task(replay(srv, session, load(164), raw_query=query))
    await asyncio.sleep(0.1)

    answers: dict[int, tuple[int, Any, Any]] = {}
    for number in range(156, 164):
        answers[number] = await replay(srv, session, load(number))
        ref = load(number)["response"]
        status, body, headers = answers[number]
        assert status == ref["status"], number
        assert ctype(headers) == ctype(ref["headers"])
        if body.get("kind") == "Status":
            assert_same_status(load(number), status, body, headers)
            assert body["details"] == ref["body"]["details"], number
        else:
            assert_same_object(body, ref["body"])

    created, deleting = answers[156][1], answers[157][1]
    assert rv(deleting) == rv(created) + 1
    assert answers[158][1] == deleting  # GET while terminating: the same object
    assert answers[160][1] == deleting  # a second DELETE changes nothing
    updated = answers[161][1]
    assert rv(updated) == rv(deleting) + 1
    # removing the last finalizer answers with the OLD resourceVersion
    assert rv(answers[162][1]) == rv(updated)

    status, lines, headers = await watch
    want = load(164)["response"]["lines"]
    assert status == 200 and headers.get("Transfer-Encoding") == "chunked"
    events = [x for x in lines if x["type"] != "BOOKMARK"]
    assert [x["type"] for x in events] == [x["type"] for x in want if x["type"] != "BOOKMARK"]
    for got, exp in zip(events, [x for x in want if x["type"] != "BOOKMARK"], strict=True):
        assert_same_object(got["object"], exp["object"])
    assert [rv(x["object"]) for x in events] == [rv(created), rv(deleting), rv(updated),
                                                 rv(updated) + 1]
    assert events[-1]["object"]["metadata"]["finalizers"] == ["example.com/f"]
    bookmarks = [x for x in lines if x["type"] == "BOOKMARK"]
    assert bookmarks and lines[-1]["type"] == "BOOKMARK"
    assert bookmarks[-1]["object"] == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
        "resourceVersion": str(rv(updated) + 1), "creationTimestamp": None}}


async def test_165_to_167_propagation_without_collector(run1: World) -> None:
    srv, session = run1
    for name in ("fg", "orph"):
        status, _, _ = await replay(srv, session, load(156), body=cm(name, ns="fin"))
        assert status == 201
    answers = {}
    for number in (165, 166, 167):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert status == 200 and ctype(headers) == "application/json"
        assert_same_object(body, ref["response"]["body"])
        answers[number] = body
    assert answers[167] == answers[165]  # gracePeriodSeconds on a terminating ConfigMap: no-op
    await asyncio.sleep(0.2)  # no collector: both stay, held by their finalizers
    for name, fin in (("fg", ["foregroundDeletion"]), ("orph", ["orphan"])):
        stored = srv.get_object("v1", "ConfigMap", name, namespace="fin")
        assert stored["metadata"]["finalizers"] == fin


async def until_gone(srv: ApiServer, kind: str, name: str, ns: str = "",
                     timeout: float = 3.0) -> float:
    """Seconds until the object is gone (polling the store)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while True:
        try:
            srv.get_object("v1", kind, name, namespace=ns)
        except StoreError:
            return loop.time() - began
        assert loop.time() - began < timeout, f"{kind} {name} still there"
        await asyncio.sleep(0.01)


async def test_foreground_and_orphan_with_collector(run2: World) -> None:
    """Beyond the pack (run 1 had no collector): with one, a Foreground delete removes the
    dependents first, then the owner; an Orphan delete keeps them without the reference."""
    srv, session = run2
    for policy in ("Foreground", "Orphan"):
        owner = srv.create_object(cm(f"owner-{policy.lower()}", ns="fin"))
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
               "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
        kid = cm(f"kid-{policy.lower()}", ns="fin")
        kid["metadata"]["ownerReferences"] = [ref]
        srv.create_object(kid)
        status, body, _ = await replay(
            srv, session, _retarget(load(165), f"owner-{policy.lower()}"),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
        assert status == 200
        assert body["metadata"]["finalizers"] == [{"Foreground": "foregroundDeletion",
                                                   "Orphan": "orphan"}[policy]]
        await until_gone(srv, "ConfigMap", f"owner-{policy.lower()}", "fin")
    with pytest.raises(StoreError):  # Foreground: the dependent went first
        srv.get_object("v1", "ConfigMap", "kid-foreground", namespace="fin")
    kept = srv.get_object("v1", "ConfigMap", "kid-orphan", namespace="fin")
    assert "ownerReferences" not in kept["metadata"]


async def test_foreground_owner_waits_for_a_blocking_dependent(run2: World) -> None:
    """Beyond the pack: a dependent with blockOwnerDeletion that is held by its own
    finalizer keeps the owner (with foregroundDeletion) until it is gone."""
    srv, session = run2
    owner = srv.create_object(cm("boss", ns="fin"))
    kid = cm("held-kid", ns="fin")
    kid["metadata"]["finalizers"] = ["example.com/f"]
    kid["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "boss",
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}]
    srv.create_object(kid)
    status, _, _ = await replay(srv, session, _retarget(load(165), "boss"))
    assert status == 200
    for _ in range(100):
        if srv.get_object("v1", "ConfigMap", "held-kid", namespace="fin")["metadata"].get(
                "deletionTimestamp"):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert srv.get_object("v1", "ConfigMap", "boss", namespace="fin")["metadata"]["finalizers"] == [
        "foregroundDeletion"]
    held = srv.get_object("v1", "ConfigMap", "held-kid", namespace="fin")
    held["metadata"]["finalizers"] = []
    srv.update_object(held)
    await until_gone(srv, "ConfigMap", "boss", "fin")


def _retarget(ref: dict[str, Any], name: str) -> dict[str, Any]:
    out = json.loads(json.dumps(ref))
    out["request"]["path"] = out["request"]["path"].rsplit("/", 1)[0] + "/" + name
    return out


@pytest.fixture
async def run2_ns() -> AsyncIterator[World]:
    """Run 2 with 0.5 s before the namespace controller acts: time for file 170's GET."""
    async for world in _world(namespace_cleanup_delay=0.5):
        yield world


async def test_168_to_171_namespace_deletion(run2_ns: World) -> None:
    srv, session = run2_ns
    content = srv.create_object(cm("content", ns="doomed"))
    start = srv.store.rv
    ns_watch = await open_watch(session, srv, "/api/v1/namespaces", resourceVersion=start,
                                fieldSelector="metadata.name=doomed", timeoutSeconds=5)
    cm_watch = await open_watch(session, srv, "/api/v1/namespaces/doomed/configmaps",
                                resourceVersion=start, timeoutSeconds=5)
    loop = asyncio.get_running_loop()
    began = loop.time()

    ref = load(168)
    status, deleted, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(deleted, ref["response"]["body"])
    assert deleted["status"] == {"phase": "Terminating"}

    ref = load(169)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]

    ref = load(170)
    status, body, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(body, ref["response"]["body"])  # Terminating, no conditions yet
    assert body == deleted

    want = load(171)["response"]["lines"]
    lines = [await ns_watch.next() for _ in want]
    assert [x["type"] for x in lines if x] == [x["type"] for x in want]
    for got, exp in zip(lines, want, strict=True):
        assert got is not None
        assert_same_object(got["object"], exp["object"])
    objs = [x["object"] for x in lines if x]
    assert rv(objs[0]) == rv(deleted) and rv(objs[2]) == rv(objs[1]) + 1
    # the real namespace controller took 5.3 s (notes of 171); ours acts after its 0.5 s
    assert loop.time() - began < min(2.0, load(171)["notes"]["namespace_404_after_s"])
    gone = await cm_watch.until("DELETED")
    assert gone["object"]["metadata"]["uid"] == content["metadata"]["uid"]
    assert rv(gone["object"]) < rv(objs[1])  # content first, then the conditions
    ns_watch.close()
    cm_watch.close()
    status, body, _ = await replay(srv, session, ref)
    assert status == 404 and body["message"] == 'namespaces "doomed" not found'


async def test_namespace_waits_for_content_finalizers(run2: World) -> None:
    """Beyond the pack: content with a finalizer keeps the namespace Terminating with the
    controller's 'remaining' conditions until the finalizer goes."""
    srv, session = run2
    held = cm("held", ns="doomed")
    held["metadata"]["finalizers"] = ["example.com/f"]
    srv.create_object(held)
    status, _, _ = await replay(srv, session, load(168))
    assert status == 200
    for _ in range(100):
        ns = srv.get_object("v1", "Namespace", "doomed", namespace="")
        if ns["status"].get("conditions"):
            break
        await asyncio.sleep(0.02)
    by_type = {c["type"]: c for c in ns["status"]["conditions"]}
    assert by_type["NamespaceContentRemaining"] | {"lastTransitionTime": ""} == {
        "type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": "",
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: configmaps. has 1 resource instances"}
    assert by_type["NamespaceFinalizersRemaining"]["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/f in 1 resource "
        "instances")
    written = srv.store.rv
    await asyncio.sleep(0.2)
    assert srv.store.rv == written  # no rewrite while nothing changes
    obj = srv.get_object("v1", "ConfigMap", "held", namespace="doomed")
    assert obj["metadata"]["deletionTimestamp"]
    obj["metadata"]["finalizers"] = []
    srv.update_object(obj)
    await until_gone(srv, "Namespace", "doomed")


async def test_172_173_owner_reference_garbage_collection(run2: World) -> None:
    srv, session = run2
    admin = {"Authorization": f"Bearer {srv.token('admin')}"}
    base = srv.url + "/api/v1/namespaces/default/configmaps"
    async with session.post(base, json={"metadata": {"name": "gc-parent"}},
                            headers=admin) as r:
        assert r.status == 201
        parent = await r.json()
    child_ref = load(172)["response"]["body"]
    owner = dict(child_ref["metadata"]["ownerReferences"][0], uid=parent["metadata"]["uid"])
    async with session.post(base, json={"metadata": {"name": "gc-child",
                                                     "ownerReferences": [owner]}},
                            headers=admin) as r:
        assert r.status == 201
    ref = load(172)
    status, child, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(child, ref["response"]["body"])
    assert child["metadata"]["ownerReferences"] == [owner]

    watch = await open_watch(session, srv, "/api/v1/namespaces/default/configmaps",
                             resourceVersion=rv(child), timeoutSeconds=3)
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with session.delete(base + "/gc-parent", headers=admin) as r:
        assert r.status == 200 and (await r.json())["status"] == "Success"
    want = load(173)["response"]["lines"]
    lines = [await watch.next() for _ in want]
    took = loop.time() - began
    watch.close()
    assert [x["type"] for x in lines if x] == [x["type"] for x in want]
    for got, exp in zip(lines, want, strict=True):
        assert got is not None
        assert_same_object(got["object"], exp["object"])
    objs = [x["object"] for x in lines if x]
    assert [o["metadata"]["name"] for o in objs] == ["gc-parent", "gc-child"]
    assert rv(objs[1]) == rv(objs[0]) + 1
    # the real collector took 0.044 s (actions of 173, DELETED lines 0.015 s apart); ours
    # waits 0.02 s: allow for a loaded machine
    assert took < 1.0
    status, body, _ = await replay(srv, session, ref)
    assert status == 404 and body["reason"] == "NotFound"


async def test_collector_keeps_objects_with_a_live_owner(run2: World) -> None:
    """Beyond the pack: a dependent with a second, live owner loses only the dangling
    reference; one created with an owner that never existed is collected."""
    srv, _ = run2
    a = srv.create_object(cm("owner-a", ns="fin"))
    b = srv.create_object(cm("owner-b", ns="fin"))
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"],
             "uid": o["metadata"]["uid"]} for o in (a, b)]
    both = cm("both", ns="fin")
    both["metadata"]["ownerReferences"] = refs
    srv.create_object(both)
    srv.delete_object("v1", "ConfigMap", "owner-a", namespace="fin")
    for _ in range(100):
        left = srv.get_object("v1", "ConfigMap", "both", namespace="fin")
        if left["metadata"]["ownerReferences"] == refs[1:]:
            break
        await asyncio.sleep(0.01)
    assert left["metadata"]["ownerReferences"] == refs[1:]
    stray = cm("stray", ns="fin")
    stray["metadata"]["ownerReferences"] = [dict(refs[0], name="never",
                                                 uid="00000000-0000-0000-0000-000000000000")]
    srv.create_object(stray)
    await until_gone(srv, "ConfigMap", "stray", "fin")
