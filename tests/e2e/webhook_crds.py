"""What the webhook e2e tests share: the manifest of a CRD whose conversion is a webhook, and
a typed pair of its versions (``spec.size`` at v1, stored; ``spec.replicas`` at v2)
converted by ``wk.convert`` functions."""

from __future__ import annotations

from typing import Any

import watchkeeper as wk
from e2e.conftest import LABELS

#: a version schema that keeps whatever ``spec`` holds
ANY_SPEC: dict[str, Any] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
    "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}


def conversion_crd(group: str, kind: str, plural: str, schemas: dict[str, dict[str, Any]],
                   storage: str, client_config: dict[str, Any]) -> dict[str, Any]:
    """A namespaced CRD serving every version of ``schemas``, ``storage`` stored, converted
    by the webhook of ``client_config``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": dict(LABELS)},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [{"name": v, "served": True, "storage": v == storage,
                          "schema": schema} for v, schema in schemas.items()],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"], "clientConfig": client_config}},
        },
    }


class SizeSpec(wk.Schema):
    size: int = 1


class ReplicasSpec(wk.Schema):
    replicas: int = 1


def size_and_replicas(group: str, kind: str) -> tuple[type[Any], type[Any]]:
    """The v1 (stored, ``spec.size``) and v2 (``spec.replicas``) classes of ``kind``, with
    their conversions both ways."""

    @wk.custom_resource(group=group, version="v1", kind=kind, storage=True)
    class AtV1(wk.CustomResource):
        spec: SizeSpec

    @wk.custom_resource(group=group, version="v2", kind=kind, storage=False)
    class AtV2(wk.CustomResource):
        spec: ReplicasSpec

    @wk.conversion(AtV1, AtV2)
    def up(old: AtV1) -> AtV2:
        return AtV2(spec=ReplicasSpec(replicas=old.spec.size))

    @wk.conversion(AtV2, AtV1)
    def down(new: AtV2) -> AtV1:
        return AtV1(spec=SizeSpec(size=new.spec.replicas))

    return AtV1, AtV2
