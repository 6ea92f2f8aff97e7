"""A CRD conversion webhook that goes down, on a real kube-apiserver and on the simulator
alike (tests/sim/contract runs this suite against it): reads and writes at the version
that is not stored fail with the API server's 500 naming the conversion, reads at the
stored version keep working, and nothing is written. The webhook is a ``WebhookServer`` on
127.0.0.1 (``url:`` client config, the caBundle published by its CertificateManager)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import watchkeeper as wk
from e2e.conftest import LABELS
from watchkeeper.webhooks import CertificateManager, WebhookCerts, WebhookServer


class PartSpecV1(wk.Schema):
    size: int = 1


class PartSpecV2(wk.Schema):
    replicas: int = 1


async def test_a_conversion_webhook_that_is_down_fails_reads_and_writes_at_the_other_version(
    client: wk.Client, namespace: str,
) -> None:
    group = f"{namespace}.example.com"

    @wk.custom_resource(group=group, version="v1", kind="Part", storage=True)
    class PartV1(wk.CustomResource):
        spec: PartSpecV1

    @wk.custom_resource(group=group, version="v2", kind="Part", storage=False)
    class PartV2(wk.CustomResource):
        spec: PartSpecV2

    @wk.conversion(PartV1, PartV2)
    def up(old: PartV1) -> PartV2:
        return PartV2(spec=PartSpecV2(replicas=old.spec.size))

    @wk.conversion(PartV2, PartV1)
    def down(new: PartV2) -> PartV1:
        return PartV1(spec=PartSpecV1(size=new.spec.replicas))

    name = f"parts.{group}"
    mgr = CertificateManager(client, WebhookCerts("hooks", namespace, local_hosts=True,
                                                  crds=(name,)))
    server = WebhookServer(mgr, port=0)
    server.conversion("/convert-parts", PartV1, PartV2)
    await server.start()
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    await crds.create({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "parts", "singular": "part", "kind": "Part"},
            "versions": [{"name": v, "served": True, "storage": v == "v1", "schema": schema}
                         for v in ("v1", "v2")],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": server.url + "/convert-parts"}}},
        },
    })
    stopped = False
    try:
        await mgr.publish()
        v1 = client.api(PartV1, namespace)
        v2 = client.api(PartV2, namespace)
        async with asyncio.timeout(60):  # until the CRD is served and its caBundle used
            while True:
                with contextlib.suppress(wk.NotFound, wk.ServerError):
                    await v2.list()
                    break
                await asyncio.sleep(0.5)
        await v1.create(PartV1(metadata=wk.ObjectMeta(name="p"), spec=PartSpecV1(size=2)))
        assert (await v2.get("p")).spec == PartSpecV2(replicas=2)

        await server.stop()  # its port now refuses connections
        stopped = True
        prefix = f"conversion webhook for {group}/v1, Kind=Part failed: Post "
        with pytest.raises(wk.ServerError) as failed:
            await v2.get("p")
        assert failed.value.code == 500 and failed.value.message.startswith(prefix)
        assert "connect: connection refused" in failed.value.message
        with pytest.raises(wk.ServerError) as failed:
            await v2.create(PartV2(metadata=wk.ObjectMeta(name="q"),
                                   spec=PartSpecV2(replicas=1)))
        assert failed.value.code == 500
        assert failed.value.message.startswith(f"conversion webhook for {group}/v2, Kind=Part")
        assert (await v1.get("p")).spec == PartSpecV1(size=2)  # the stored version: no call
        assert [p.metadata.name for p in await v1.list()] == ["p"]  # q was not written
    finally:
        with contextlib.suppress(wk.NotFound):
            await crds.delete(name)
        if not stopped:
            await server.stop()
