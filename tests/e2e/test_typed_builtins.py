"""Built-in kinds as classes (``wk.k8s``) on a real API server: what kube-apiserver returns
for a Deployment, Service, ConfigMap, Secret, Pod and Job (its defaults, the service
account volume, managedFields) reads into the generated class and comes back unchanged."""

from __future__ import annotations

from typing import Any

import pytest

import watchkeeper as wk
from runtime.typed.builtin_cases import LABELS, declared, manifests, without_nulls


@pytest.mark.parametrize(("cls", "manifest"), manifests(),
                         ids=[cls.__name__ for cls, _ in manifests()])
async def test_what_the_server_returns_reads_into_the_class_unchanged(
    client: wk.Client, namespace: str, cls: type[wk.k8s.Kind], manifest: dict[str, Any],
) -> None:
    api = client.api(cls, namespace=namespace)
    created = await api.api.create(manifest)
    assert declared(cls, created) == without_nulls(created)
    typed = await api.get("typed")
    assert isinstance(typed, cls) and typed.metadata.labels == LABELS
    assert wk.to_dict(typed) == without_nulls(created)
