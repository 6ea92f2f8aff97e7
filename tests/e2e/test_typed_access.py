"""Typed access on a real API server: ``client.api(Site)`` reads and writes typed objects, an
older class's replace keeps the field it does not know, server-side apply of a typed object
owns only what it declares, and a ``TypedController`` reconciles typed objects (the same
scenarios as tests/runtime/typed/test_typed_access.py on the simulator).

The CRD's group is this run's own (WATCHKEEPER_E2E_PREFIX-random), deleted afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

import watchkeeper as wk
from runtime.typed.typed_operator import NarrowSite, Site, SiteSpec, reconcile
from runtime.typed.website import in_group

from .conftest import PREFIX


@pytest.fixture
async def classes(client: wk.Client) -> AsyncIterator[tuple[type[Site], type[NarrowSite]]]:
    group = f"{PREFIX}-{uuid.uuid4().hex[:8]}.example.com"
    site, narrow = in_group(Site, group), in_group(NarrowSite, group)
    [crd] = await wk.install_crds(client, site)
    try:
        yield site, narrow  # type: ignore[misc]
    finally:
        with contextlib.suppress(wk.NotFound):
            await client.api("customresourcedefinitions.apiextensions.k8s.io").delete(
                crd["metadata"]["name"])


async def test_typed_reads_and_writes(
    client: wk.Client, namespace: str, classes: tuple[type[Site], type[NarrowSite]],
) -> None:
    site_cls, narrow_cls = classes
    sites = client.api(site_cls, namespace=namespace)
    made = site_cls(metadata=wk.ObjectMeta(name="old", namespace=namespace),
                    spec=SiteSpec(image="nginx:1.25", tier="premium"))
    created = await sites.create(made)
    assert created.metadata.uid and created.metadata.generation == 1
    assert created.spec.replicas == 1  # the schema's default, filled by the server

    narrow = client.api(narrow_cls, namespace=namespace)
    seen = await narrow.get("old")
    seen.spec.replicas = 4
    await narrow.replace(seen)
    after = await sites.get("old")
    assert (after.spec.tier, after.spec.replicas) == ("premium", 4)

    with pytest.raises(wk.Conflict):
        await sites.apply(site_cls(metadata=wk.ObjectMeta(name="old", namespace=namespace),
                                   spec=SiteSpec(image="nginx:1.27", replicas=4)),
                          field_manager="e2e-typed")
    applied = await sites.apply(
        site_cls(metadata=wk.ObjectMeta(name="old", namespace=namespace),
                 spec=SiteSpec(image="nginx:1.27", replicas=4)),
        field_manager="e2e-typed", force=True)
    assert applied.spec.image == "nginx:1.27" and applied.spec.tier == "premium"


async def test_a_typed_controller(
    client: wk.Client, namespace: str, classes: tuple[type[Site], type[NarrowSite]],
) -> None:
    site_cls, _ = classes
    sites = client.api(site_cls, namespace=namespace)
    await sites.create(site_cls(metadata=wk.ObjectMeta(name="c", namespace=namespace),
                                spec=SiteSpec(image="nginx:1.25", replicas=3)))
    ctl = wk.TypedController(sites, wk.ControllerConfig(handle_signals=False))
    stop = asyncio.Event()
    task = asyncio.create_task(ctl.run(reconcile, context=sites, stop=stop))
    try:
        async with asyncio.timeout(60):
            while True:
                got = await sites.get("c")
                if got.status is not None and got.status.replicas == 3:
                    break
                await asyncio.sleep(0.2)
        assert got.status.observed_generation == got.metadata.generation
    finally:
        stop.set()
        await task
