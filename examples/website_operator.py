"""A typed operator to copy from: each Website (examples/website.py) is served by a
Deployment and a Service that it owns.

- The Website is a Python class (examples/website.py); its CRD is generated from it and
  installed by ``setup`` (``wk.install_crds``), and the reconcile reads it typed: mypy
  checks every field it touches (``mypy --strict`` passes on this file).
- The Deployment and the Service are ``wk.k8s`` classes, written with server-side apply, each
  with an ownerReference to its Website: a change to either (the Deployment's pods becoming
  available) reconciles the Website again, and the garbage collector deletes them with it.
- ``status.conditions`` has a ``Ready`` condition that says what is true: ``False`` with
  reason ``Progressing`` until the Deployment has as many available pods as the Website asks
  for, then ``True`` (``Available``). ``status.replicas`` counts the available pods and
  ``status.selector`` selects them (``kubectl scale website`` works through it).
- A finalizer deletes the Deployment and the Service before the Website goes (a cluster
  without the garbage collector, like ``ApiServer(garbage_collector=False)``, needs that).
- An image from a registry the operator does not trust is refused: ``Ready`` False with
  reason ``ImageRefused``, and a ``wk.PermanentError``, so no retry until the spec changes;
  the Recorder publishes it as a Warning Event that ``kubectl describe website`` shows.

Run it: ``watchkeeper run examples/website_operator.py:setup`` (kubeconfig from the usual
places; it needs the right to apply CRDs), or against the simulator in the tests
(tests/examples/test_website_operator.py). Print the CRD alone:
``watchkeeper crd examples/website_operator.py:Website``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
from website import Port, Website, WebsiteStatus

import watchkeeper as wk

__all__ = ["FINALIZER", "MANAGER", "Website", "Websites", "reconcile", "refusal", "setup"]

FINALIZER = "example.com/website-cleanup"
MANAGER = "website-operator"
REPORTER = "example.com/website-operator"  # the Events' reportingController
TRUSTED_REGISTRIES = frozenset({"docker.io", "registry.example.com", "ghcr.io"})
DEFAULT_PORTS = [Port(name="http", port=80)]
CPU = {"free": "50m", "standard": "100m", "premium": "500m"}  # requested per pod, by tier


class Websites:
    """The reconcile context: the APIs it reads and writes (all namespaces, or one)."""

    def __init__(self, client: wk.Client, namespace: str | None = None,
                 resource: type[Website] = Website) -> None:
        self.sites: wk.TypedApi[Website] = client.api(resource, namespace=namespace)
        self.deployments: wk.TypedApi[wk.k8s.Deployment] = client.api(
            wk.k8s.Deployment, namespace=namespace)
        self.services: wk.TypedApi[wk.k8s.Service] = client.api(
            wk.k8s.Service, namespace=namespace)


def registry(image: str) -> str:
    """The registry an image is pulled from, as the container runtime reads the name:
    ``nginx:1.25`` and ``team/site:2`` are on docker.io."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def refusal(site: Website) -> str | None:
    """Why the operator will never serve this Website as it is, or None: a policy, so
    retrying cannot help; only a change of the spec can."""
    source = registry(site.spec.image)
    if source not in TRUSTED_REGISTRIES:
        trusted = ", ".join(sorted(TRUSTED_REGISTRIES))
        return f"image {site.spec.image!r} is from {source}, not a trusted registry ({trusted})"
    return None


def pod_labels(site: Website) -> dict[str, str]:
    """What selects the site's pods (the Deployment's selector, the Service's)."""
    return {"app.kubernetes.io/name": "website",
            "app.kubernetes.io/instance": site.metadata.name or ""}


def controller_reference(site: Website) -> wk.OwnerReference:
    """The Website as its children's controller (``wk.owner_reference`` needs the object
    as the server returned it: its uid)."""
    ref = wk.owner_reference(wk.to_dict(site), controller=True, block_owner_deletion=True)
    return msgspec.convert(ref, wk.OwnerReference)


def child_metadata(site: Website) -> wk.ObjectMeta:
    return wk.ObjectMeta(name=site.metadata.name, namespace=site.metadata.namespace,
                         labels={**pod_labels(site), "app.kubernetes.io/managed-by": MANAGER},
                         owner_references=[controller_reference(site)])


def deployment(site: Website) -> wk.k8s.Deployment:
    """The Deployment serving the site: only what this operator decides is in it, so server
    side apply leaves every other field to its owner (``kubectl scale deployment`` is not
    one: the Website's replicas win)."""
    k8s, spec = wk.k8s, site.spec
    selector = pod_labels(site)
    container = k8s.Container(
        name="web", image=spec.image,
        ports=[k8s.ContainerPort(name=p.name, container_port=p.port, protocol=p.protocol)
               for p in spec.ports or DEFAULT_PORTS],
        resources=k8s.ResourceRequirements(
            requests={"cpu": CPU[spec.tier], "memory": str(spec.memory)},
            limits={"memory": str(spec.memory)}))
    return k8s.Deployment(
        metadata=child_metadata(site),
        spec=k8s.DeploymentSpec(
            replicas=spec.replicas,
            selector=k8s.LabelSelector(match_labels=selector),
            strategy=k8s.DeploymentStrategy(
                type="RollingUpdate",
                rolling_update=k8s.RollingUpdateDeployment(max_unavailable=spec.max_unavailable)),
            template=k8s.PodTemplateSpec(
                metadata=wk.ObjectMeta(labels={**spec.labels, **selector}),
                spec=k8s.PodSpec(containers=[container]))))


def service(site: Website) -> wk.k8s.Service:
    """The Service in front of the site's pods, one port for each of the Website's."""
    k8s = wk.k8s
    metadata = child_metadata(site)
    if site.spec.domain:
        metadata.annotations = {"example.com/domain": site.spec.domain}
    return k8s.Service(
        metadata=metadata,
        spec=k8s.ServiceSpec(
            selector=pod_labels(site),
            ports=[k8s.ServicePort(name=p.name, port=p.port, target_port=p.name,
                                   protocol=p.protocol)
                   for p in site.spec.ports or DEFAULT_PORTS]))


def selector_string(site: Website) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(pod_labels(site).items()))


def observe(site: Website, served: wk.k8s.Deployment | None, refused: str | None) -> None:
    """Set ``site.status`` (in place) to what is true now."""
    status = site.status = site.status or WebsiteStatus()
    status.observed_generation = site.metadata.generation
    status.selector = selector_string(site)
    if refused is not None:  # what runs stays as it was: the change is what is refused
        wk.conditions.set_condition(site, "Ready", "False", "ImageRefused", refused)
        return
    available = 0
    current = False
    if served is not None and served.status is not None:
        available = served.status.available_replicas or 0
        # the Deployment controller has seen the spec just applied (else its counts are old)
        current = (served.status.observed_generation or 0) >= (served.metadata.generation or 0)
    status.replicas = available
    wanted = site.spec.replicas
    message = f"{available} of {wanted} replicas available"
    if current and available >= wanted:
        wk.conditions.set_condition(site, "Ready", "True", "Available", message)
    else:
        wk.conditions.set_condition(site, "Ready", "False", "Progressing", message)


def status_patch(status: WebsiteStatus) -> dict[str, Any]:
    """The whole status as a merge patch: every field named, so a value back at its default
    (0 replicas) is written too (``msgspec.to_builtins`` leaves defaults out)."""
    return {"status": {"observedGeneration": status.observed_generation,
                       "replicas": status.replicas, "selector": status.selector,
                       "conditions": msgspec.to_builtins(status.conditions)}}


async def write_status(site: Website, ctx: Websites, before: Any) -> None:
    """Write the status only if it changed: a reconcile with nothing new costs no request."""
    if site.status is not None and msgspec.to_builtins(site.status) != before:
        await ctx.sites.patch_status(site.metadata.name or "", status_patch(site.status),
                                     namespace=site.metadata.namespace)


async def reconcile(site: Website, ctx: Websites) -> wk.Action:
    name, ns = site.metadata.name or "", site.metadata.namespace
    before = msgspec.to_builtins(site.status) if site.status is not None else None

    async def serve(_: dict[str, Any]) -> wk.Action:
        if (refused := refusal(site)) is not None:
            observe(site, None, refused)
            await write_status(site, ctx, before)
            raise wk.PermanentError(refused)  # a Warning Event; no retry until it changes
        served = await ctx.deployments.apply(deployment(site), field_manager=MANAGER,
                                             force=True)
        await ctx.services.apply(service(site), field_manager=MANAGER, force=True)
        observe(site, served, None)
        await write_status(site, ctx, before)
        return wk.Action.await_change()  # the Deployment's status changes reconcile it again

    async def cleanup(_: dict[str, Any]) -> wk.Action:
        for children in (ctx.deployments, ctx.services):  # idempotent: it may run twice
            with contextlib.suppress(wk.NotFound):
                await children.delete(name, namespace=ns)
        return wk.Action.await_change()

    return await wk.finalizer(ctx.sites.api, FINALIZER, wk.to_dict(site), serve, cleanup)


def controller(client: wk.Client, namespace: str | None = None,
               resource: type[Website] = Website) -> tuple[wk.TypedController[Website],
                                                           Websites]:
    """The controller and its context. Only spec changes (a new generation), the
    finalizer's own write and the owned children's changes reconcile a Website: its own
    status writes do not, so a refused image is reconciled (and its Event published) once,
    not again at each write."""
    ctx = Websites(client, namespace, resource)
    ctl = wk.TypedController(
        ctx.sites, wk.ControllerConfig(),
        predicate=wk.predicates.any_changed(wk.predicates.generation_changed,
                                            wk.predicates.finalizers_changed),
        recorder=wk.Recorder(client, REPORTER))
    ctl.owns(ctx.deployments).owns(ctx.services)
    return ctl, ctx


async def setup(client: wk.Client, namespace: str | None = None,
                resource: type[Website] = Website) -> wk.Operator:
    """The entry point for ``watchkeeper run``: installs the CRD (generated from the class),
    then reconciles Websites in all namespaces unless one is given."""
    await wk.install_crds(client, resource, field_manager=MANAGER)
    ctl, ctx = controller(client, namespace, resource)
    return ctl.operator(reconcile, context=ctx)
