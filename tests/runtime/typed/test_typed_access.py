"""Typed access against the simulator: ``client.api(Site)`` reads and writes ``Site``
objects, a write gives back what the class does not know, the Store is read typed, and a
``TypedController``'s reconcile receives the typed object."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from .typed_operator import GROUP, NarrowSite, Site, SiteSpec, SiteStatus, new_site, reconcile

NS = "default"


class Strict(wk.CustomResource):
    """A class stricter than the CRD: a status of strings."""

    spec: SiteSpec
    status: dict[str, str] | None = None


@wk.custom_resource(group=GROUP, version="v1", kind="Site")
class Picky(wk.CustomResource):
    """A class with a required field the server never has."""

    spec: SiteSpec
    must: str


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[wk.Client]:
    async with apiserver.client() as client:
        await wk.install_crds(client, Site)
        yield client


async def test_create_get_list_are_typed(client: wk.Client) -> None:
    sites = client.api(Site, namespace=NS)
    assert isinstance(sites, wk.TypedApi) and sites.cls is Site
    created = await sites.create(new_site("a", "nginx:1.25", replicas=2))
    assert isinstance(created, Site) and isinstance(created.spec, SiteSpec)
    assert (created.api_version, created.kind) == (f"{GROUP}/v1", "Site")
    meta = created.metadata
    assert isinstance(meta, wk.ObjectMeta)
    assert (meta.name, meta.namespace, meta.generation) == ("a", NS, 1)
    assert meta.uid and meta.resource_version and isinstance(meta.creation_timestamp, datetime)
    assert created.spec.tier == "standard"  # the server's default, the class's too
    got = await sites.get("a")
    assert got == created
    await sites.create(new_site("b", "nginx:1.26"))
    assert sorted((s.metadata.name, s.spec.image) for s in await sites.list()) == [
        ("a", "nginx:1.25"), ("b", "nginx:1.26")]


async def test_a_typed_object_that_does_not_fit_is_a_validation_error(
    client: wk.Client,
) -> None:
    raw = client.api(f"sites.{GROUP}", namespace=NS)
    await raw.create({"apiVersion": f"{GROUP}/v1", "kind": "Site",
                      "metadata": {"name": "x"}, "spec": {"image": "i", "replicas": 3}})

    await raw.patch_status("x", {"status": {"replicas": 3}})
    with pytest.raises(msgspec.ValidationError, match=r"Expected `str`, got `(int|array)` - at "
                                                      r"`\$.status\[...\]`"):
        await wk.TypedApi(raw, Strict).get("x")


async def test_replace_keeps_what_the_class_does_not_know(client: wk.Client) -> None:
    """An older class (no ``tier``) replaces a Site: the server's ``tier`` survives, and so
    do labels and any metadata the class's ObjectMeta would not know."""
    sites = client.api(Site, namespace=NS)
    site = new_site("old", "nginx:1.25")
    site.spec.tier = "premium"
    site.metadata.labels = {"team": "web"}
    await sites.create(site)
    narrow = client.api(NarrowSite, namespace=NS)
    seen = await narrow.get("old")
    assert not hasattr(seen.spec, "tier")
    seen.spec.replicas = 4
    written = await narrow.replace(seen)
    assert written.spec.replicas == 4 and written.metadata.generation == 2
    after = await sites.get("old")
    assert (after.spec.tier, after.spec.replicas) == ("premium", 4)
    assert after.metadata.labels == {"team": "web"}


def test_unknown_fields_round_trip_at_every_depth() -> None:
    """What a newer server sends (a field of metadata, of spec, at the root) comes back in
    ``to_dict``; what the object changed wins; what it cleared stays cleared."""
    sent: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1", "kind": "Site", "extra": {"a": 1},
        "metadata": {"name": "n", "namespace": NS, "labels": {"x": "1"},
                     "futureField": {"k": "v"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                          "name": "o", "uid": "u", "newFlag": True}]},
        "spec": {"image": "i", "replicas": 2, "tier": "free", "later": [1, 2]},
    }
    site = wk.from_dict(Site, sent)
    site.spec.replicas = 3
    site.metadata.labels = {}
    out = wk.to_dict(site)
    assert out["extra"] == {"a": 1}
    assert out["metadata"]["futureField"] == {"k": "v"}
    assert "labels" not in out["metadata"]  # cleared by the caller
    assert out["spec"] == {"image": "i", "replicas": 3, "tier": "free", "later": [1, 2]}
    # list items are written as the class has them (a list is replaced whole)
    assert out["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}]
    assert sent["spec"]["replicas"] == 2  # the source is never changed
    out["extra"]["a"] = 2
    out["metadata"]["futureField"]["k"] = "changed"
    assert sent["extra"] == {"a": 1} and sent["metadata"]["futureField"] == {"k": "v"}
    fresh = new_site("f", "i")
    assert wk.to_dict(fresh)["metadata"] == {"name": "f", "namespace": NS}


async def test_status_patch_and_apply_are_typed(client: wk.Client) -> None:
    sites = client.api(Site, namespace=NS)
    site = await sites.create(new_site("s", "nginx:1.25"))
    site.status = SiteStatus(observed_generation=1, replicas=1)
    updated = await sites.replace_status(site)
    assert updated.status == SiteStatus(observed_generation=1, replicas=1)
    patched = await sites.patch("s", {"spec": {"replicas": 5}})
    assert patched.spec.replicas == 5 and patched.metadata.generation == 2
    st = await sites.patch_status("s", {"status": {"replicas": 5}})
    assert st.status is not None and st.status.replicas == 5
    with pytest.raises(wk.Conflict, match=r"\.spec\.image"):  # the creator owns it
        await sites.apply(new_site("s", "nginx:1.27", replicas=5), field_manager="tacc")
    applied = await sites.apply(new_site("s", "nginx:1.27", replicas=5), field_manager="tacc",
                                force=True)
    assert applied.spec.image == "nginx:1.27"
    managers = {m["manager"] for m in applied.metadata.managed_fields}
    assert "tacc" in managers
    mine = Site(metadata=wk.ObjectMeta(name="s", namespace=NS), spec=applied.spec,
                status=SiteStatus(observed_generation=2, replicas=5))
    after = await sites.apply_status(mine, field_manager="tacc-status", force=True)
    assert after.status is not None and after.status.observed_generation == 2
    gone = await sites.delete("s")
    assert gone.get("kind") in ("Status", "Site")


async def test_a_typed_controller_reconciles_typed_objects(client: wk.Client) -> None:
    sites = client.api(Site, namespace=NS)
    await sites.create(new_site("c1", "nginx:1.25", replicas=2))
    await sites.create(new_site("c2", "nginx:1.25", replicas=3))
    seen: list[Site] = []

    async def spy(site: Site, ctx: wk.TypedApi[Site]) -> wk.Action:
        seen.append(site)
        return await reconcile(site, ctx)

    ctl = wk.TypedController(sites, wk.ControllerConfig(handle_signals=False))
    stop = asyncio.Event()
    task = asyncio.create_task(ctl.run(spy, context=sites, stop=stop))
    try:
        await eventually(lambda: {s.metadata.name for s in seen} >= {"c1", "c2"})
        assert all(isinstance(s, Site) for s in seen)

        async def done() -> bool:
            return all(s.status is not None and s.status.replicas == s.spec.replicas
                       for s in await sites.list())
        async with asyncio.timeout(20):
            while not await done():
                await asyncio.sleep(0.05)
        store = ctl.store
        assert isinstance(store, wk.TypedStore) and len(store) == 2
        await eventually(lambda: all(s.status is not None for s in store.list()))
        c2 = store.get("c2", namespace=NS)
        assert c2 is not None and c2.status is not None and c2.status.replicas == 3
        # each read is a new object: changing it changes nothing cached
        c2.spec.replicas = 9
        again = store.get("c2", namespace=NS)
        assert again is not None and again.spec.replicas == 3
        assert store.get("missing", namespace=NS) is None
        assert ("default", "c1") in store
    finally:
        stop.set()
        await task
    assert ctl.controller.results["success"] >= 2


async def test_an_object_the_class_refuses_fails_its_reconcile(client: wk.Client) -> None:
    raw = client.api(f"sites.{GROUP}", namespace=NS)
    await raw.create({"apiVersion": f"{GROUP}/v1", "kind": "Site", "metadata": {"name": "ok"},
                      "spec": {"image": "i"}})

    calls: list[str] = []
    errors: list[BaseException] = []

    def reconcile_picky(obj: Picky, ctx: Any) -> wk.Action:
        calls.append(obj.must)
        return wk.Action.await_change()

    def policy(obj: dict[str, Any], exc: BaseException, ctx: Any) -> wk.Action:
        errors.append(exc)
        return wk.Action.requeue(3600)

    ctl = wk.TypedController(client.api(Picky, namespace=NS),
                             wk.ControllerConfig(handle_signals=False))
    stop = asyncio.Event()
    task = asyncio.create_task(ctl.run(reconcile_picky, policy, stop=stop))
    try:
        await eventually(lambda: bool(errors))
    finally:
        stop.set()
        await task
    assert calls == [] and isinstance(errors[0], msgspec.ValidationError)
    assert "must" in str(errors[0])


async def test_the_operator_for_wk_run_reconciles_typed_objects(client: wk.Client) -> None:
    """``ctl.operator(reconcile)`` is what ``wk.run`` takes: its reconcile gets the cached
    dict and calls the typed function, async or not, with the object as a ``Site``."""
    sites = client.api(Site, namespace=NS)
    ctl = wk.TypedController(sites)
    got: list[tuple[str, Site]] = []

    def sync(site: Site, ctx: Any) -> wk.Action:
        got.append(("sync", site))
        return wk.Action.requeue(5)

    async def coro(site: Site, ctx: Any) -> wk.Action:
        got.append(("async", site))
        return wk.Action.await_change()

    obj = wk.to_dict(new_site("o", "nginx:1.25"))
    for fn in (sync, coro):
        op = ctl.operator(fn, context="ctx")
        assert op.controller is ctl.controller and op.context == "ctx"
        result = op.reconcile(obj, op.context)
        action = await result if asyncio.iscoroutine(result) else result
        assert action in (wk.Action.requeue(5), wk.Action.await_change())
    assert [(kind, type(s), s.spec.image) for kind, s in got] == [
        ("sync", Site, "nginx:1.25"), ("async", Site, "nginx:1.25")]
