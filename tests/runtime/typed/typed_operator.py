"""A typed operator as a user writes one: ``mypy --strict`` passes on this file
(test_typed_mypy.py runs it, and shows a planted type error failing).

A Site's reconcile reads the typed object and writes its status through the typed Api."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

import watchkeeper as wk

GROUP = "typed.example.com"


class SiteSpec(wk.Schema):
    """What a Site asks for."""

    image: str
    replicas: Annotated[int, msgspec.Meta(ge=0, le=10)] = 1
    tier: Literal["free", "standard", "premium"] = "standard"


class SiteStatus(wk.Schema):
    observed_generation: int | None = None
    replicas: int = 0
    conditions: wk.Conditions = []


@wk.custom_resource(group=GROUP, version="v1")
class Site(wk.CustomResource):
    """A site, for the typed access tests."""

    spec: SiteSpec
    status: SiteStatus | None = None


class NarrowSpec(wk.Schema):
    """An older client's view of a Site: it does not know ``tier``."""

    image: str
    replicas: int = 1


@wk.custom_resource(group=GROUP, version="v1", kind="Site")
class NarrowSite(wk.CustomResource):
    spec: NarrowSpec


def new_site(name: str, image: str, replicas: int = 1) -> Site:
    return Site(metadata=wk.ObjectMeta(name=name, namespace="default"),
                spec=SiteSpec(image=image, replicas=replicas))


async def reconcile(site: Site, ctx: wk.TypedApi[Site]) -> wk.Action:
    """Report the spec's replicas as ready, once per generation."""
    status = site.status or SiteStatus()
    if status.observed_generation == site.metadata.generation:
        return wk.Action.await_change()
    site.status = SiteStatus(observed_generation=site.metadata.generation,
                             replicas=site.spec.replicas)
    await ctx.replace_status(site)
    return wk.Action.await_change()


def deployment(site: Site) -> wk.k8s.Deployment:
    """The Deployment serving a Site: a built-in kind, typed as well."""
    k8s = wk.k8s
    labels = {"site": site.metadata.name or ""}
    return k8s.Deployment(
        metadata=wk.ObjectMeta(name=site.metadata.name, namespace=site.metadata.namespace),
        spec=k8s.DeploymentSpec(
            replicas=site.spec.replicas, selector=k8s.LabelSelector(match_labels=labels),
            template=k8s.PodTemplateSpec(
                metadata=wk.ObjectMeta(labels=labels),
                spec=k8s.PodSpec(containers=[k8s.Container(name="web", image=site.spec.image)]))))


async def scale(client: wk.Client, name: str) -> int | None:
    deployments: wk.TypedApi[wk.k8s.Deployment] = client.api(wk.k8s.Deployment)
    found = await deployments.get(name)
    return found.spec.replicas if found.spec is not None else None


def controller(client: wk.Client) -> tuple[wk.TypedController[Site], wk.TypedApi[Site]]:
    sites: wk.TypedApi[Site] = client.api(Site, namespace="default")
    return wk.TypedController(sites, wk.ControllerConfig(concurrency=2)), sites


def first_image(store: wk.TypedStore[Site]) -> str | None:
    found = store.list()
    return found[0].spec.image if found else None


async def run(client: wk.Client, stop: Any) -> None:
    ctl, sites = controller(client)
    await ctl.run(reconcile, context=sites, stop=stop)
