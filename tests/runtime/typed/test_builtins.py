"""Built-in kinds as classes (``wk.k8s``), against the simulator: each of Deployment,
Service, ConfigMap, Secret, Pod and Job reads into its class and comes back unchanged, and
``client.api(wk.k8s.Deployment)`` is typed. tests/e2e/test_typed_builtins.py runs the same
on a real API server."""

from __future__ import annotations

from datetime import datetime

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from .builtin_cases import LABELS, declared, manifests, without_nulls

NS = "default"


@pytest.mark.parametrize(("cls", "manifest"), manifests(),
                         ids=[cls.__name__ for cls, _ in manifests()])
async def test_what_the_server_returns_reads_into_the_class_unchanged(
    apiserver: ApiServer, cls: type[wk.k8s.Kind], manifest: dict[str, object],
) -> None:
    async with apiserver.client() as client:
        api = client.api(cls, namespace=NS)
        created = await api.api.create(manifest)
        assert declared(cls, created) == without_nulls(created)
        typed = await api.get("typed")
        assert isinstance(typed, cls) and typed.metadata.labels == LABELS
        assert isinstance(typed.metadata.creation_timestamp, datetime)
        assert wk.to_dict(typed) == without_nulls(created)


async def test_typed_verbs_on_a_deployment(apiserver: ApiServer) -> None:
    k8s = wk.k8s
    async with apiserver.client() as client:
        deployments = client.api(k8s.Deployment, namespace=NS)
        made = await deployments.create(k8s.Deployment(
            metadata=wk.ObjectMeta(name="web", namespace=NS),
            spec=k8s.DeploymentSpec(
                replicas=2, selector=k8s.LabelSelector(match_labels=LABELS),
                template=k8s.PodTemplateSpec(
                    metadata=wk.ObjectMeta(labels=LABELS),
                    spec=k8s.PodSpec(containers=[k8s.Container(
                        name="web", image="nginx:1.25",
                        ports=[k8s.ContainerPort(container_port=80)])])))))
        assert (made.api_version, made.kind) == ("apps/v1", "Deployment")
        assert made.spec is not None and made.spec.replicas == 2
        pod = made.spec.template.spec  # a field the schema does not require: T | None
        assert pod is not None
        container = pod.containers[0]
        assert container.ports is not None
        assert (container.image, container.ports[0].container_port) == ("nginx:1.25", 80)
        made.spec.replicas = 3
        replaced = await deployments.replace(made)
        assert replaced.spec is not None and replaced.spec.replicas == 3
        secret = await client.api(k8s.Secret, namespace=NS).create(k8s.Secret(
            metadata=wk.ObjectMeta(name="s", namespace=NS), data={"key": b"\x00\x01secret"}))
        assert secret.data == {"key": b"\x00\x01secret"}  # base64 on the wire, bytes here
        raw = await client.api("secrets", namespace=NS).get("s")
        assert raw["data"] == {"key": "AAFzZWNyZXQ="}


def test_a_field_of_the_wrong_type_names_its_path() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.spec\.replicas"):
        msgspec.convert({"apiVersion": "apps/v1", "kind": "Deployment",
                         "spec": {"replicas": "two", "selector": {}, "template": {}}},
                        wk.k8s.Deployment)
