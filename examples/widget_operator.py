"""A small operator to copy from: each Widget (example.com/v1) gets a ConfigMap it owns.

- The ConfigMap `widget-<name>` holds the Widget's `spec.data`, written with server-side
  apply, and carries an ownerReference to the Widget, so changing or deleting the child
  re-triggers the parent.
- A finalizer deletes the ConfigMap before the Widget goes (clusters without the garbage
  collector, like `ApiServer(garbage_collector=False)`, need that; elsewhere it shows the
  pattern).
- `status.phase` and `status.observedGeneration` report progress.

Run it: `watchkeeper run examples/widget_operator.py:setup` (kubeconfig from the usual
places), or against the simulator in the tests (tests/examples/test_widget_operator.py).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import watchkeeper as wk

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
FINALIZER = "example.com/widget-cleanup"
MANAGER = "widget-operator"

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
        },
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}


def child_name(widget: dict[str, Any]) -> str:
    return f"widget-{wk.meta.name(widget)}"


class Widgets:
    """The reconcile context: the APIs it writes to."""

    def __init__(self, client: wk.Client) -> None:
        self.client = client

    def widgets(self, namespace: str | None) -> wk.Api:
        return self.client.api(f"{PLURAL}.{GROUP}", namespace=namespace)

    def configmaps(self, namespace: str | None) -> wk.Api:
        return self.client.api("configmaps", namespace=namespace)


async def reconcile(widget: dict[str, Any], ctx: Widgets) -> wk.Action:
    ns = wk.meta.namespace(widget)

    async def apply(obj: dict[str, Any]) -> wk.Action:
        desired = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": child_name(obj), "namespace": ns,
                         "labels": {"app.kubernetes.io/managed-by": MANAGER}},
            "data": {str(k): str(v) for k, v in (obj.get("spec") or {}).get("data", {}).items()},
        }
        wk.set_controller_reference(desired, obj)  # the Widget controls it (and deletes it)
        await ctx.configmaps(ns).patch(
            child_name(obj), desired, type="apply", field_manager=MANAGER, force=True
        )
        status = {"status": {"phase": "Ready",
                             "observedGeneration": obj["metadata"].get("generation")}}
        if (obj.get("status") or {}) != status["status"]:
            await ctx.widgets(ns).patch_status(wk.meta.name(obj), status, type="merge")
        return wk.Action.await_change()

    async def cleanup(obj: dict[str, Any]) -> wk.Action:
        with contextlib.suppress(wk.NotFound):
            await ctx.configmaps(ns).delete(child_name(obj))
        return wk.Action.await_change()

    return await wk.finalizer(ctx.widgets(ns), FINALIZER, widget, apply, cleanup)


def setup(client: wk.Client, namespace: str | None = None) -> wk.Operator:
    """The entry point for `watchkeeper run`: all namespaces unless one is given."""
    ctx = Widgets(client)
    controller = wk.Controller(ctx.widgets(namespace)).owns(ctx.configmaps(namespace))
    return wk.Operator(controller, reconcile, context=ctx)


def setup_sharded(client: wk.Client, namespace: str | None = None) -> wk.Operator:
    """The same operator run as N active replicas, each owning a part of the Widgets
    (examples/deploy/widget-operator-sharded.yaml): `watchkeeper run
    widget_operator:setup_sharded`, without --leader-election. The replica id is the pod
    name (POD_NAME) plus a random suffix; the Leases live in POD_NAMESPACE."""
    ctx = Widgets(client)
    sharding = wk.Sharding(ring="widget-operator",
                           lease_namespace=os.environ.get("POD_NAMESPACE", "default"))
    controller = wk.Controller(ctx.widgets(namespace), sharding=sharding)
    controller.owns(ctx.configmaps(namespace))
    return wk.Operator(controller, reconcile, context=ctx)
