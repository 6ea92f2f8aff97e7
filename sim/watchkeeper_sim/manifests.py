"""Manifests tests and demos keep needing, written once."""

from __future__ import annotations

from typing import Any


def crd_manifest(
    plural: str = "widgets",
    group: str = "example.com",
    kind: str = "Widget",
    *,
    version: str = "v1",
    namespaced: bool = True,
    status: bool = True,
) -> dict[str, Any]:
    """A v1 CustomResourceDefinition with an open schema (any fields kept)."""
    served: dict[str, Any] = {
        "name": version, "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                      "listKind": f"{kind}List"},
            "versions": [served],
        },
    }
