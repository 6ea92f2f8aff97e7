"""Issue 24: the simulator calls a CRD's conversion webhook as kube-apiserver 1.28.7 does,
held to tests/fixtures/apiserver-1.28-issue24-conversion (a real server calling the same
webhook, scripts/capture_issue24_conversion.py), over real HTTPS on 127.0.0.1.

What the simulator does alike: the ConversionReview v1 it posts (one object per review, a
list converted object by object, ``?timeout=30s``), the response checks and their messages
(a reason-less 500), writes at the non-storage version stored at the storage version, objects
stored at an older storage version converted on read, a watch event it cannot convert left
out. What it does not: kube-apiserver's watch cache of every served version converts each
write once in the background (and a list or watch from it calls nothing); the simulator
converts when a request reads (docs/simulator.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .._util import open_watch
from ..conftest import Req
from ._conversion import CRDS, GROUP, NS, Hook, crd, gadget, load, norm, path, running_hook

V1, V2 = f"{GROUP}/v1", f"{GROUP}/v2"


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    async for h in running_hook():
        yield h


@pytest.fixture
def world(apiserver: ApiServer, hook: Hook) -> Hook:
    """The capture's namespace and CRD (v1 stored, v2 by ``hook``)."""
    apiserver.create_object({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": NS}})
    apiserver.create_object(crd(hook), manager="curl")
    return hook


def recorded_message(number: int) -> str:
    body = load(number)["response"]["body"]
    assert body["code"] == 500 and "reason" not in body
    return norm(body["message"])


def received(number: int) -> list[tuple[str, list[tuple[str, str, Any]]]]:
    """The reviews of a reference file as ``Hook.reviews`` shows them."""
    return [(r["body"]["request"]["desiredAPIVersion"], [
        (o["apiVersion"], o["metadata"]["name"], o.get("spec"))
        for o in r["body"]["request"]["objects"]]) for r in load(number)["webhook_received"]]


async def test_a_read_at_the_other_version_posts_one_review_as_the_real_server(
        world: Hook, req: Req) -> None:
    hook = world
    status, _, _ = await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    assert status == 201
    assert hook.received == []  # the real server's one call here is its v2 watch cache
    status, body, _ = await req("GET", path("v1", "g-a"))
    assert (status, body["spec"], hook.received) == (200, {"size": 3}, [])  # file 004

    status, body, _ = await req("GET", path("v2", "g-a"))  # file 005
    want = load(5)
    assert status == 200
    assert (body["apiVersion"], body["spec"]) == (V2, want["response"]["body"]["spec"])
    assert hook.reviews() == received(5)
    (got,) = hook.received
    (recorded,) = want["webhook_received"]
    assert got["headers"] == recorded["headers"]
    assert norm(got["path"]) == norm(recorded["path"]) == "/convert?timeout=30s"
    review, ref = got["body"], recorded["body"]
    assert list(review) == list(ref) and review["response"] == ref["response"]
    assert list(review["request"]) == list(ref["request"])
    (sent,), (ref_obj,) = review["request"]["objects"], ref["request"]["objects"]
    # the stored object as it is, but its resourceVersion: etcd's decoder sets that after
    # the conversion, so the real server's review carries none (file 005)
    assert sent["metadata"]["uid"] == body["metadata"]["uid"]
    assert sorted(sent["metadata"]) == sorted(ref_obj["metadata"])


async def test_a_list_at_the_other_version_converts_object_by_object(
        world: Hook, req: Req) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    await req("POST", path("v1"), json=gadget("v1", "g-b", 5))
    status, body, _ = await req("GET", path("v2"))  # file 008: one review per object
    assert status == 200 and body["apiVersion"] == V2
    assert [(i["apiVersion"], i["spec"]) for i in body["items"]] == [
        (V2, {"replicas": 3}), (V2, {"replicas": 5})]
    assert hook.reviews() == received(8)
    hook.received.clear()
    status, body, _ = await req("GET", path("v1"))
    assert status == 200 and hook.received == []  # file 009


async def test_a_write_at_the_other_version_is_stored_at_the_storage_version(
        world: Hook, req: Req, apiserver: ApiServer) -> None:
    hook = world
    status, body, _ = await req("POST", path("v2"), json=gadget("v2", "g-b", 5))  # file 006
    assert (status, body["apiVersion"], body["spec"]) == (201, V2, {"replicas": 5})
    # v2 -> v1 to store, v1 -> v2 to answer (the real server's third is its watch cache's)
    assert hook.reviews() == received(6)[:2]
    (rt,) = [t for t in apiserver.store.types.values() if t.group == GROUP][:1]
    stored = apiserver.store.get(rt, NS, "g-b")
    assert (stored["apiVersion"], stored["spec"]) == (V1, {"size": 5})
    assert stored["metadata"]["managedFields"][0]["apiVersion"] == V2  # as file 006 shows
    hook.received.clear()
    status, body, _ = await req("GET", path("v1", "g-b"))  # file 007
    assert (status, body["spec"], hook.received) == (200, {"size": 5}, [])

    status, current, _ = await req("GET", path("v2", "g-b"))
    current["spec"]["replicas"] = 6
    hook.received.clear()
    status, body, _ = await req("PUT", path("v2", "g-b"), json=current)  # file 011
    assert (status, body["apiVersion"], body["spec"]) == (200, V2, {"replicas": 6})
    assert body["metadata"]["generation"] == 2
    assert (V1, [(V2, "g-b", {"replicas": 6})]) in hook.reviews()
    status, body, _ = await req(
        "PATCH", path("v2", "g-b"), json={"spec": {"replicas": 8}},
        headers={"Content-Type": "application/merge-patch+json"})  # file 012
    assert (status, body["spec"], body["metadata"]["generation"]) == (200, {"replicas": 8}, 3)
    assert apiserver.store.get(rt, NS, "g-b")["spec"] == {"size": 8}
    status, body, _ = await req("DELETE", path("v2", "g-b"))  # file 013
    assert status == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert apiserver.store.peek(rt, NS, "g-b") is None


async def test_a_watch_at_the_other_version_converts_each_event_and_leaves_out_what_fails(
        world: Hook, req: Req, apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    watch = await open_watch(session, apiserver, path("v2"), resourceVersion="0")
    try:
        first = await watch.next()
        assert first is not None and first["type"] == "ADDED"
        assert (first["object"]["apiVersion"], first["object"]["spec"]) == (V2, {"replicas": 3})
        await req("POST", path("v1"), json=gadget("v1", "g-c", 7))  # file 010's action
        ev = await watch.next()
        assert ev is not None and ev["type"] == "ADDED"
        assert (ev["object"]["metadata"]["name"], ev["object"]["spec"]) == ("g-c",
                                                                            {"replicas": 7})
        assert (V2, [(V1, "g-c", {"size": 7})]) in hook.reviews()
        hook.mode = "failure"  # file 028: g-e, which cannot be converted, is left out
        await req("POST", path("v1"), json=gadget("v1", "g-e", 1))
        async with asyncio.timeout(3):  # the watch's review of g-e, answered Failure
            while not any(o[1] == "g-e" for _, objs in hook.reviews() for o in objs):
                await asyncio.sleep(0.01)
        hook.mode = "ok"
        await req("POST", path("v1"), json=gadget("v1", "g-f", 2))
        ev = await watch.next()
        assert ev is not None and ev["object"]["metadata"]["name"] == "g-f"
    finally:
        watch.close()
    names = [line["object"]["metadata"]["name"] for line in load(28)["response"]["lines"]]
    assert "g-e" not in names  # what the reference showed


@pytest.mark.parametrize(("mode", "number"), [
    ("wrong-uid", 14), ("failure", 15), ("failure-bare", 16), ("none", 17), ("rename", 18),
    ("same-version", 19), ("kind", 20), ("bad-label", 22), ("no-metadata", 23),
    ("http500", 24)])
async def test_a_webhook_answer_the_real_server_refuses_is_its_500(
        world: Hook, req: Req, mode: str, number: int) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    hook.mode = mode
    status, body, _ = await req("GET", path("v2", "g-a"))
    assert status == 500 and body["code"] == 500 and "reason" not in body
    assert norm(body["message"]) == recorded_message(number)
    assert len(hook.received) == 1


async def test_labels_and_annotations_are_kept_and_other_metadata_restored(
        world: Hook, req: Req) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    hook.mode = "meta"
    status, body, _ = await req("GET", path("v2", "g-a"))  # file 021
    want = load(21)["response"]["body"]["metadata"]
    meta = body["metadata"]
    assert status == 200
    assert (meta["labels"], meta["generation"], meta.get("finalizers")) == (
        want["labels"], want["generation"], want.get("finalizers")) == ({"converted": "yes"},
                                                                        1, None)


async def test_the_webhook_down_or_too_slow_is_the_real_servers_500(
        world: Hook, req: Req, apiserver: ApiServer) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    await hook.stop()
    status, body, _ = await req("GET", path("v2", "g-a"))  # file 030
    assert (status, norm(body["message"])) == (500, recorded_message(30))
    status, body, _ = await req("POST", path("v2"), json=gadget("v2", "g-g", 1))  # file 031
    assert (status, norm(body["message"])) == (500, recorded_message(31))
    await hook.start()  # the same port
    hook.mode = "slow"
    apiserver.conversion.timeout = 0.2  # the real client's 30 s (file 032), shortened
    status, body, _ = await req("GET", path("v2", "g-a"))
    assert status == 500
    assert norm(body["message"]).replace("timeout=0.2s", "timeout=30s") == recorded_message(32)


async def test_a_write_whose_conversion_fails_stores_nothing(
        world: Hook, req: Req, apiserver: ApiServer) -> None:
    hook = world
    hook.mode = "failure"
    status, body, _ = await req("POST", path("v2"), json=gadget("v2", "g-d", 1))  # file 026
    assert (status, norm(body["message"])) == (500, recorded_message(26))
    assert hook.reviews() == received(26)
    hook.mode = "rename"
    status, body, _ = await req("POST", path("v2"), json=gadget("v2", "g-f", 1))  # file 029
    assert (status, norm(body["message"])) == (500, recorded_message(29))
    hook.received.clear()
    hook.mode = "failure"
    status, body, _ = await req("POST", path("v1"), json=gadget("v1", "g-e", 1))  # file 027
    assert status == 201 and hook.received == []
    status, body, _ = await req("GET", path("v1"))
    assert [i["metadata"]["name"] for i in body["items"]] == ["g-e"]


async def test_objects_stored_at_an_older_storage_version_are_converted(
        world: Hook, req: Req) -> None:
    hook = world
    await req("POST", path("v1"), json=gadget("v1", "g-a", 3))
    status, current, _ = await req("GET", f"{CRDS}/gadgets.{GROUP}")
    changed = crd(hook, storage="v2")
    changed["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    status, _, _ = await req("PUT", f"{CRDS}/gadgets.{GROUP}", json=changed)  # file 033
    assert status == 200
    hook.received.clear()
    status, body, _ = await req("POST", path("v2"), json=gadget("v2", "g-h", 2))  # file 034
    assert status == 201 and hook.received == []  # the new storage version: no call
    status, body, _ = await req("GET", path("v2", "g-a"))  # file 035
    assert (status, body["spec"]) == (200, {"replicas": 3})
    assert hook.reviews() == received(35)
    hook.received.clear()
    status, body, _ = await req("GET", path("v1"))  # file 037: only g-h is converted
    assert [(i["metadata"]["name"], i["spec"]) for i in body["items"]] == [
        ("g-a", {"size": 3}), ("g-h", {"size": 2})]
    assert hook.reviews() == received(37)


async def test_a_crd_whose_review_versions_lack_v1_is_refused(
        apiserver: ApiServer, hook: Hook, req: Req) -> None:
    status, body, _ = await req("POST", CRDS, json=crd(hook, review_versions=["v9"]))
    want = load(1)["response"]
    assert (status, body["message"]) == (want["status"], want["body"]["message"])
    assert body["details"]["causes"] == want["body"]["details"]["causes"]


async def test_an_apply_and_a_deletecollection_at_the_other_version_go_through_the_webhook(
        world: Hook, req: Req, apiserver: ApiServer) -> None:
    hook = world
    apply = {"Content-Type": "application/apply-patch+yaml"}
    params = {"fieldManager": "tester"}
    status, body, _ = await req("PATCH", path("v2", "g-s"), json=gadget("v2", "g-s", 4),
                                headers=apply, params=params)
    assert (status, body["apiVersion"], body["spec"]) == (201, V2, {"replicas": 4})
    (rt,) = [t for t in apiserver.store.types.values() if t.group == GROUP][:1]
    assert apiserver.store.get(rt, NS, "g-s")["spec"] == {"size": 4}
    status, body, _ = await req("PATCH", path("v2", "g-s"), json=gadget("v2", "g-s", 9),
                                headers=apply, params=params)
    assert (status, body["spec"], body["metadata"]["generation"]) == (200, {"replicas": 9}, 2)
    assert apiserver.store.get(rt, NS, "g-s")["spec"] == {"size": 9}
    hook.received.clear()
    status, body, _ = await req("DELETE", path("v2"))
    assert status == 200
    assert [(i["apiVersion"], i["spec"]) for i in body["items"]] == [(V2, {"replicas": 9})]
    assert hook.reviews() == [(V2, [(V1, "g-s", {"size": 9})])]
