"""A custom resource written as Python classes: the Website CRD is generated from them.

The classes are the schema (types, bounds, patterns, enums, defaults, CEL rules), the
validation the API server enforces, and the documentation ``kubectl explain`` shows (the
docstrings). Print the CRD, or install it:

    watchkeeper crd examples/website.py:Website | kubectl apply -f -
    await wk.install_crds(client, Website)

A field is snake_case in Python and camelCase in the cluster (``min_replicas`` is
``spec.minReplicas``); the string right below a field documents it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

import watchkeeper as wk

IMAGE = r"^[a-z0-9]([-a-z0-9._/]*[a-z0-9])?(:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?$"
PORT_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


class Port(wk.Schema):
    """A port the site is served on."""

    name: Annotated[str, msgspec.Meta(pattern=PORT_NAME, max_length=15)]
    """The port's name, unique in the list: ports merge by it (server-side apply)."""
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)]
    """The port number."""
    protocol: Literal["TCP", "UDP"] = "TCP"
    """TCP or UDP."""


@wk.Rule("self.minReplicas <= self.replicas", message="minReplicas must not exceed replicas",
         field_path=".minReplicas")
class WebsiteSpec(wk.Schema):
    """The desired state of a Website."""

    image: Annotated[str, msgspec.Meta(pattern=IMAGE, max_length=255),
                     wk.Rule("!self.endsWith(':latest')",
                             message="pin a version: the tag ':latest' is not allowed")]
    """The container image serving the site, e.g. nginx:1.25."""
    replicas: Annotated[int, msgspec.Meta(ge=1, le=10)] = 1
    """How many pods serve the site."""
    min_replicas: Annotated[int, msgspec.Meta(ge=1, le=10)] = 1
    """Never scale below this many pods."""
    tier: Literal["free", "standard", "premium"] = "standard"
    """The service level: decides the resources each pod gets."""
    labels: Annotated[dict[str, str], msgspec.Meta(max_length=16)] = {}
    """Labels put on every pod of the site."""
    ports: Annotated[list[Port], wk.ListMap("name"), msgspec.Meta(max_length=8)] = []
    """The ports the site listens on."""
    max_unavailable: wk.IntOrString = "25%"
    """Pods that may be down during an update: a number or a percentage."""
    memory: wk.Quantity = "128Mi"
    """Memory for each pod, as a Kubernetes quantity (128Mi, 1Gi)."""
    domain: Annotated[str, wk.Rule("self == oldSelf", message="domain is immutable")] | None = None
    """The domain the site answers to; set once, never changed."""


class WebsiteStatus(wk.Schema):
    """What the operator last did about the Website."""

    observed_generation: int | None = None
    """The metadata.generation the status describes."""
    replicas: int = 0
    """Pods running the site now."""
    selector: str | None = None
    """The label selector of the site's pods (for the scale subresource)."""
    conditions: wk.Conditions = []
    """Ready and other conditions, by type."""


@wk.custom_resource(
    group="example.com", version="v1", short_names=["ws"], categories=["web"],
    printer_columns=[
        wk.PrinterColumn("Image", ".spec.image"),
        wk.PrinterColumn("Replicas", ".spec.replicas"),
        wk.PrinterColumn("Tier", ".spec.tier", priority=1),
        wk.PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        wk.PrinterColumn("Age", ".metadata.creationTimestamp"),
    ],
    scale=wk.Scale(label_selector_path=".status.selector"),
)
class Website(wk.CustomResource):
    """A static website served by a pool of web server pods."""

    spec: WebsiteSpec
    """What the site should be."""
    status: WebsiteStatus | None = None
    """What the operator last saw and did."""
