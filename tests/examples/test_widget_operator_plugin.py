"""The worked example of docs/guide.md, "Testing your operator": examples/widget_operator.py
tested the way a user tests an operator, with watchkeeper-sim's pytest fixtures only."""

from __future__ import annotations

from pathlib import Path

import widget_operator

CRD_FILE = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "widget-crd.yaml"


def ready(widget: dict) -> bool:
    return widget["status"]["phase"] == "Ready"


async def test_a_widget_gets_its_configmap_and_a_ready_status(
        k8s_client, k8s_namespace, k8s_crds, k8s_operator, k8s_wait_for) -> None:
    await k8s_crds(CRD_FILE)
    await k8s_operator(lambda client: widget_operator.setup(client, namespace=k8s_namespace))

    widgets = k8s_client.api("widgets.example.com", namespace=k8s_namespace)
    configmaps = k8s_client.api("configmaps", namespace=k8s_namespace)
    await widgets.create({"apiVersion": "example.com/v1", "kind": "Widget",
                          "metadata": {"name": "w"}, "spec": {"data": {"colour": "red"}}})

    child = await k8s_wait_for(configmaps, "widget-w")
    assert child["data"] == {"colour": "red"}
    assert child["metadata"]["ownerReferences"][0]["name"] == "w"
    widget = await k8s_wait_for(widgets, "w", ready)
    assert widget["status"]["observedGeneration"] == 1
