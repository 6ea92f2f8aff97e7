"""Issue 22, case 1: deleting a CRD whose custom resources hold finalizers, replayed from
tests/fixtures/apiserver-1.28-issue22 files 001-019 (kube-apiserver 1.28.7).

The CRD stays (deletionTimestamp, finalizer customresourcecleanup, Terminating) while the
custom resources it deleted wait for their finalizers; they stay served, watchable and
writable (creates refused with 405, an apply still creates), and the CRD and its resource
go once the last finalizer is removed. The simulator's finalizer polls every 50 ms where
the real one polls every 5 s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .._util import open_watch
from ._issue22 import CRDS, GROUP, World, conditions, crd, load22, send, want, world
from .test_contract import assert_same_status, ctype

PATH = f"/apis/{GROUP}/v1/namespaces/cases-1/gadgets"
CRD_PATH = f"{CRDS}/gadgets.{GROUP}"


@pytest.fixture
async def cases1() -> AsyncIterator[World]:
    async for w in world("cases-1"):
        yield w


def gadget(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "cases-1"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": meta,
            "spec": {"size": 1}}


def terminating(item: dict[str, Any]) -> tuple[Any, ...]:
    meta = item["metadata"]
    return (meta["name"], meta.get("generation"), meta.get("deletionGracePeriodSeconds"),
            meta.get("finalizers"), "deletionTimestamp" in meta)


async def test_crd_deletion_waits_for_the_finalizers_of_its_custom_resources(
        cases1: World) -> None:
    srv, session = cases1
    srv.create_object(crd("gadgets", "Gadget", {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}},
        status=True), manager="curl")
    status, _, _ = await send(srv, session, 1)  # g-a, with a finalizer
    assert status == 201
    srv.create_object(gadget("g-b", ["cases.example.com/hold"]), manager="curl")
    srv.create_object(gadget("g-c"), manager="curl")
    rv = srv.store.rv
    crs = await open_watch(session, srv, PATH, resourceVersion=rv)
    crds = await open_watch(session, srv, CRDS, resourceVersion=rv,
                            fieldSelector=f"metadata.name=gadgets.{GROUP}")

    status, body, _ = await send(srv, session, 2)  # DELETE the CRD: 200 + the CRD
    assert status == 200 and body["kind"] == "CustomResourceDefinition"
    assert body["metadata"]["finalizers"] == want(2)["metadata"]["finalizers"]
    assert "deletionTimestamp" in body["metadata"]
    assert conditions(body) == conditions(want(2))  # InstanceDeletionPending

    status, body, _ = await send(srv, session, 3)  # the CRD stays, deletion in progress
    assert status == 200
    assert conditions(body) == conditions(want(3))
    assert body["metadata"]["finalizers"] == want(3)["metadata"]["finalizers"]
    assert [(m["manager"], m.get("subresource")) for m in body["metadata"]["managedFields"]] \
        == [(m["manager"], m.get("subresource")) for m in want(3)["metadata"]["managedFields"]]

    status, body, _ = await send(srv, session, 4)  # still listed, terminating, generation+1
    assert status == 200
    assert [terminating(i) for i in body["items"]] == [terminating(i) for i in want(4)["items"]]

    status, body, _ = await send(srv, session, 5)  # discovery: no create/patch/update verbs
    assert [(r["name"], r["verbs"]) for r in body["resources"]] == [
        (r["name"], r["verbs"]) for r in want(5)["resources"]]

    status, body, headers = await send(srv, session, 6)  # create: 405
    assert_same_status(load22(6), status, body, headers)
    assert body == want(6)

    for number, code in ((7, 201), (8, 200)):  # an apply creates; delete it again
        status, body, _ = await send(srv, session, number)
        assert status == code, (number, body)

    status, body, _ = await send(srv, session, 9)  # updates are allowed
    assert status == 200 and body["metadata"]["generation"] == want(9)["metadata"]["generation"]
    assert body["spec"] == want(9)["spec"]
    status, body, _ = await send(srv, session, 10)  # and so is /status
    assert status == 200 and body["status"] == want(10)["status"]

    status, body, headers = await send(srv, session, 11)  # no new finalizers: 422
    assert_same_status(load22(11), status, body, headers)
    assert body["details"]["causes"] == want(11)["details"]["causes"]

    status, body, _ = await send(srv, session, 12)  # g-a's finalizer goes, and g-a with it
    assert status == 200 and "finalizers" not in body["metadata"]
    status, body, headers = await send(srv, session, 13)
    assert_same_status(load22(13), status, body, headers)

    status, body, _ = await send(srv, session, 14)  # the CRD waits for g-b
    assert status == 200 and conditions(body) == conditions(want(14))

    status, _, _ = await send(srv, session, 15)  # g-b's finalizer goes: the CRD can finish
    assert status == 200
    started = time.monotonic()
    while (await send(srv, session, 16))[0] != 404:
        assert time.monotonic() - started < 2.0, "the CRD never went"
        await asyncio.sleep(0.02)
    status, body, headers = await send(srv, session, 16)
    assert (status, ctype(headers), body) == (404, "text/plain", want(16))
    status, body, headers = await send(srv, session, 17)
    assert_same_status(load22(17), status, body, headers)

    # the custom resources' watch: what the capture saw, then the server ends the stream
    lines = [e for e in await crs.rest(timeout=5.0) if e["type"] != "BOOKMARK"]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [
        (e["type"], e["object"]["metadata"]["name"]) for e in want(19)]
    assert [terminating(e["object"]) for e in lines] == [
        terminating(e["object"]) for e in want(19)]
    # the CRD's watch: Pending, InProgress, then DELETED (still InProgress, finalizer kept)
    seen = [await crds.next() for _ in want(18)]
    assert [(e["type"], conditions(e["object"]), e["object"]["metadata"].get("finalizers"))
            for e in seen if e is not None] == [
        (e["type"], conditions(e["object"]), e["object"]["metadata"].get("finalizers"))
        for e in want(18)]
    crds.close()


async def test_a_crd_without_blocked_instances_goes_at_once(cases1: World) -> None:
    """No finalizers: the CRD and its resource are gone when the DELETE returns (154)."""
    srv, session = cases1
    srv.create_object(crd("gadgets", "Gadget", {"spec": {"type": "object"}}))
    srv.create_object(gadget("g-c"), manager="curl")
    status, _, _ = await send(srv, session, 2)
    assert status == 200
    status, body, headers = await send(srv, session, 16)
    assert (status, ctype(headers), body) == (404, "text/plain", want(16))
    status, _, _ = await send(srv, session, 17)
    assert status == 404


async def test_a_crd_with_a_finalizer_of_its_own_waits_for_it(cases1: World) -> None:
    """Only customresourcecleanup is the CRD finalizer's to remove (crd_finalizer.go): with
    another finalizer the CRD stays, Terminating False InstanceDeletionCompleted, until it
    goes too (not in the capture: the controller's code path)."""
    srv, session = cases1
    definition = crd("gadgets", "Gadget", {"spec": {"type": "object"}})
    definition["metadata"]["finalizers"] = ["cases.example.com/keep"]
    srv.create_object(definition, manager="curl")
    srv.create_object(gadget("g-c"), manager="curl")
    status, _, _ = await send(srv, session, 2)
    assert status == 200
    status, body, _ = await send(srv, session, 3)
    assert status == 200 and body["metadata"]["finalizers"] == ["cases.example.com/keep"]
    assert conditions(body)[-1] == ("Terminating", "False", "InstanceDeletionCompleted",
                                    "removed all instances")
    status, body, _ = await send(srv, session, 4)  # served still, and empty
    assert status == 200 and body["items"] == []
    headers = {"Authorization": f"Bearer {srv.token('admin')}",
               "Content-Type": "application/merge-patch+json"}
    async with session.patch(srv.url + CRD_PATH, json={"metadata": {"finalizers": None}},
                             headers=headers) as resp:
        assert resp.status == 200
    status, body, headers = await send(srv, session, 16)
    assert (status, ctype(headers), body) == (404, "text/plain", want(16))
