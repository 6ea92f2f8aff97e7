"""Owner-reference helpers: the reference they build, the rules of
``set_controller_reference`` (controller-runtime's), and a child they mark is owned for
real: the simulator's garbage collector deletes it with its owner, and ``owns`` maps
its changes to the owner."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"


def widget(name: str, uid: str = "u-1", ns: str | None = NS) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "uid": uid}
    if ns is not None:
        md["namespace"] = ns
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md}


def child() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": NS}}


def test_owner_reference_names_the_owner() -> None:
    assert wk.owner_reference(widget("w")) == {
        "apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u-1"}
    assert wk.owner_reference(widget("w"), controller=True, block_owner_deletion=True) == {
        "apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u-1",
        "controller": True, "blockOwnerDeletion": True}
    listed = {"metadata": {"name": "d", "namespace": NS, "uid": "u-2"}}  # a LIST item
    with pytest.raises(ValueError, match="api_version= and kind="):
        wk.owner_reference(listed)
    assert wk.owner_reference(listed, api_version="apps/v1", kind="Deployment")["kind"] == (
        "Deployment")
    with pytest.raises(ValueError, match="uid"):
        wk.owner_reference({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})


def test_set_controller_reference_adds_replaces_and_keeps_other_owners() -> None:
    c = child()
    plain = wk.owner_reference(widget("other", uid="u-9"))
    c["metadata"]["ownerReferences"] = [plain]
    assert wk.set_controller_reference(c, widget("w")) is c  # in place, returned
    assert c["metadata"]["ownerReferences"] == [
        plain, wk.owner_reference(widget("w"), controller=True, block_owner_deletion=True)]
    assert wk.controller_of(c) == c["metadata"]["ownerReferences"][1]
    # the same owner again (even a new version of its API): replaced where it stands
    again = widget("w", uid="u-1")
    again["apiVersion"] = "example.com/v2"
    wk.set_controller_reference(c, again)
    refs = c["metadata"]["ownerReferences"]
    assert len(refs) == 2 and refs[1]["apiVersion"] == "example.com/v2"
    # a plain owner added to a controlled child keeps the controller bit where it was
    wk.set_owner_reference(c, again)
    assert wk.controller_of(c) == refs[1] and len(c["metadata"]["ownerReferences"]) == 2
    wk.set_owner_reference(c, widget("third", uid="u-3"))
    assert [r["name"] for r in c["metadata"]["ownerReferences"]] == ["other", "w", "third"]
    assert wk.controller_of(child()) is None
    bare: dict[str, Any] = {"kind": "ConfigMap"}  # no metadata yet
    assert wk.set_owner_reference(bare, widget("w"))["metadata"]["ownerReferences"][0][
        "name"] == "w"


def test_a_child_controlled_by_another_owner_is_refused_with_a_typed_error() -> None:
    c = wk.set_controller_reference(child(), widget("first", uid="u-1"))
    before = copy.deepcopy(c)
    with pytest.raises(wk.AlreadyOwned) as info:
        wk.set_controller_reference(c, widget("second", uid="u-2"))
    assert isinstance(info.value, wk.WatchkeeperError)
    assert info.value.child == "ConfigMap default/c" and info.value.owner["name"] == "first"
    assert "already controlled by Widget 'first'" in str(info.value)
    assert c == before  # nothing changed
    # but a plain (non-controller) owner may be added
    wk.set_owner_reference(c, widget("second", uid="u-2"))
    assert len(c["metadata"]["ownerReferences"]) == 2


def test_cross_namespace_owners_are_refused() -> None:
    with pytest.raises(ValueError, match="cross-namespace"):
        wk.set_controller_reference(child(), widget("w", ns="elsewhere"))
    # a cluster-scoped owner may own a namespaced child; a child without a namespace yet
    # (about to be created through a namespaced Api) is not judged
    assert wk.set_controller_reference(child(), widget("w", ns=None))
    assert wk.set_controller_reference({"metadata": {"name": "c"}}, widget("w"))


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


async def test_a_child_marked_by_the_helper_is_owned_for_real(srv: ApiServer) -> None:
    """``owns`` maps the child's change to its owner, and the garbage collector deletes
    the child with it: the reference the helper wrote is one the server honours."""
    reconciled: Counter[str] = Counter()
    async with srv.client() as client:
        secrets = client.api("secrets", namespace=NS)
        cms = client.api("configmaps", namespace=NS)
        owner = await secrets.create({"apiVersion": "v1", "kind": "Secret",
                                      "metadata": {"name": "owner", "namespace": NS}})
        await cms.create(wk.set_controller_reference(child(), owner))

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            reconciled[wk.meta.name(obj)] += 1
            return wk.Action.await_change()

        ctrl = wk.Controller(secrets, wk.ControllerConfig(handle_signals=False)).owns(cms)
        stop = asyncio.Event()
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        try:
            await eventually(lambda: reconciled["owner"] >= 1)
            before = reconciled["owner"]
            await cms.patch("c", {"data": {"x": "1"}}, type="merge")
            await eventually(lambda: reconciled["owner"] > before)  # the child's change
            await secrets.delete("owner")
            async with asyncio.timeout(20):  # garbage-collected with its owner
                while (await cms.list()).items:
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
