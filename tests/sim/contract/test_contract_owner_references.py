"""Issue 22, case 2: owner references and finalizers under strategic merge patch, and the
one-controller rule, replayed from tests/fixtures/apiserver-1.28-issue22 files 020-036.

``metadata.ownerReferences`` merges by uid and ``finalizers`` as a set (ObjectMeta's
patchStrategy tags), so adding an owner keeps the controller, and the garbage collector
then keeps the child when the other owner goes. A second ``controller: true`` is 422 with
the list quoted as Go's %#v (pointer addresses normalised here)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .._util import cm, open_watch
from ._issue22 import GROUP, World, crd, load22, norm22, send, want, world
from .test_contract import assert_same_status

CMS = "/api/v1/namespaces/cases-2/configmaps"


@pytest.fixture
async def cases2() -> AsyncIterator[World]:
    async for w in world("cases-2"):
        yield w


def real_uids() -> tuple[str, str]:
    """owner-1's and owner-2's uids on the real server (in the requests that name them)."""
    return (load22(20)["request"]["body"]["metadata"]["ownerReferences"][0]["uid"],
            load22(21)["request"]["body"]["metadata"]["ownerReferences"][0]["uid"])


def with_uids(body: Any, mapping: dict[str, str]) -> Any:
    text = json.dumps(body)
    for real, ours in mapping.items():
        text = text.replace(real, ours)
    return json.loads(text)


async def owners(srv: Any) -> dict[str, str]:
    """owner-1 and owner-2 made in the simulator: real uid -> simulator uid."""
    made = [srv.create_object(cm(n, ns="cases-2"), manager="curl")
            for n in ("owner-1", "owner-2")]
    return dict(zip(real_uids(), (m["metadata"]["uid"] for m in made), strict=True))


def names(obj: dict[str, Any]) -> list[str]:
    return [r["name"] for r in obj["metadata"].get("ownerReferences") or []]


def assert_same_invalid(number: int, status: int, body: Any, headers: Any) -> None:
    """A 422 with Go pointers in it: same shape, same text once addresses are normalised."""
    ref = load22(number)
    assert_same_status(ref, status, body, headers, exact=False)
    expected = want(number)
    assert norm22(body["message"]) == norm22(expected["message"])
    assert [(c["reason"], c["field"], norm22(c["message"])) for c in body["details"]["causes"]] \
        == [(c["reason"], c["field"], norm22(c["message"])) for c in expected["details"]["causes"]]


async def test_an_added_owner_merges_by_uid_and_the_child_survives_its_deletion(
        cases2: World) -> None:
    srv, session = cases2
    uids = await owners(srv)
    status, child, _ = await send(srv, session, 20, body=with_uids(
        load22(20)["request"]["body"], uids))
    assert status == 201 and names(child) == names(want(20))
    watch = await open_watch(session, srv, CMS, resourceVersion=srv.store.rv,
                             fieldSelector="metadata.name=child")

    status, body, _ = await send(srv, session, 21, body=with_uids(
        load22(21)["request"]["body"], uids))
    assert status == 200
    assert names(body) == names(want(21)) == ["owner-2", "owner-1"]  # merged, new one first
    assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [
        uids[r["uid"]] for r in want(21)["metadata"]["ownerReferences"]]

    status, body, _ = await send(srv, session, 22)  # owner-2 goes
    assert status == 200 and body["status"] == "Success"
    for _ in range(100):  # the collector drops the dangling reference, not the child
        await asyncio.sleep(0.02)
        if names(srv.get_object("v1", "ConfigMap", "child", namespace="cases-2")) == [
                "owner-1"]:
            break
    status, body, _ = await send(srv, session, 23)
    assert status == 200 and names(body) == names(want(23)) == ["owner-1"]

    seen = [await watch.next() for _ in want(24)]
    assert [(e["type"], names(e["object"])) for e in seen if e is not None] == [
        (e["type"], names(e["object"])) for e in want(24)]
    with pytest.raises(asyncio.TimeoutError):  # and never DELETED
        await watch.next(timeout=0.3)
    watch.close()

    status, body, _ = await send(srv, session, 36, body=with_uids(
        load22(36)["request"]["body"], uids))  # $patch: delete by uid
    assert status == 200 and "ownerReferences" not in body["metadata"]


async def test_a_second_controller_is_422_on_create_and_update(cases2: World) -> None:
    srv, session = cases2
    uids = await owners(srv)
    await send(srv, session, 20, body=with_uids(load22(20)["request"]["body"], uids))
    status, body, headers = await send(srv, session, 25, body=with_uids(
        load22(25)["request"]["body"], uids))  # SMP on a ConfigMap: the cause 4 times
    assert_same_invalid(25, status, body, headers)
    assert len({c["message"] for c in body["details"]["causes"]}) == 1
    for number in (26, 27, 28):  # creates: once (27: first vs second, first vs third)
        status, body, headers = await send(srv, session, number, body=with_uids(
            load22(number)["request"]["body"], uids))
        assert_same_invalid(number, status, body, headers)
    srv.create_object({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "web", "namespace": "cases-2"}, "spec": {"replicas": 1}}, manager="curl")
    status, body, headers = await send(srv, session, 30, body=with_uids(
        load22(30)["request"]["body"], uids))  # a Deployment update: 3 times
    assert_same_invalid(30, status, body, headers)
    srv.create_object(crd("parts", "Part", {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}), manager="curl")
    srv.create_object({"apiVersion": f"{GROUP}/v1", "kind": "Part", "metadata": {
        "name": "p", "namespace": "cases-2"}, "spec": {}}, manager="curl")
    status, body, headers = await send(srv, session, 31, body=with_uids(
        load22(31)["request"]["body"], uids))  # a custom resource: 3 different messages
    assert_same_invalid(31, status, body, headers)
    assert len({c["message"] for c in body["details"]["causes"]}) == 3
    status, body, headers = await send(srv, session, 32)  # and no strategic merge at all
    assert_same_status(load22(32), status, body, headers)


async def test_an_owner_reference_without_its_merge_key_is_500(cases2: World) -> None:
    srv, session = cases2
    uids = await owners(srv)
    await send(srv, session, 20, body=with_uids(load22(20)["request"]["body"], uids))
    status, body, headers = await send(srv, session, 29)
    assert_same_status(load22(29), status, body, headers)
    assert body == want(29)


async def test_finalizers_merge_as_a_set(cases2: World) -> None:
    srv, session = cases2
    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "fin", "namespace": "cases-2", "finalizers": ["cases.example.com/a"]}},
        manager="curl")
    for number in (33, 34, 35):  # [b, a], then [c, b, a], then $deleteFromPrimitiveList
        status, body, _ = await send(srv, session, number)
        assert status == 200
        assert body["metadata"]["finalizers"] == want(number)["metadata"]["finalizers"]


async def test_owners_of_the_same_name_stay_apart(cases2: World) -> None:
    """The operator's case: its controller owner and another owner share a name (a custom
    resource "web" and a ConfigMap "web"). Merged by uid (021) the child keeps both, and
    when the ConfigMap goes the collector keeps the child (its controller lives, 023/024);
    merged by name, the controller reference was overwritten and the child collected."""
    srv, session = cases2
    srv.create_object(crd("parts", "Part", {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}), manager="curl")
    part = srv.create_object({"apiVersion": f"{GROUP}/v1", "kind": "Part", "metadata": {
        "name": "web", "namespace": "cases-2"}, "spec": {}}, manager="curl")
    other = srv.create_object(cm("web", ns="cases-2"), manager="curl")
    controller = {"apiVersion": f"{GROUP}/v1", "kind": "Part", "name": "web",
                  "uid": part["metadata"]["uid"], "controller": True,
                  "blockOwnerDeletion": True}
    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "child", "namespace": "cases-2", "ownerReferences": [controller]}},
        manager="curl")
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "name": "web",
             "uid": other["metadata"]["uid"]}
    status, body, _ = await send(srv, session, 21, body={
        "metadata": {"ownerReferences": [extra]}})
    assert status == 200
    assert [(r["kind"], r.get("controller")) for r in body["metadata"]["ownerReferences"]] == [
        ("ConfigMap", None), ("Part", True)]
    srv.registry.delete(srv.resource("v1", "ConfigMap"), "cases-2", "web")
    await asyncio.sleep(0.3)  # the collector runs within ~20 ms
    child = srv.get_object("v1", "ConfigMap", "child", namespace="cases-2")
    assert [r["kind"] for r in child["metadata"]["ownerReferences"]] == ["Part"]
