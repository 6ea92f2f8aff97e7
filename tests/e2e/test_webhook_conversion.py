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
from e2e.webhook_crds import (
    ANY_SPEC,
    ReplicasSpec,
    SizeSpec,
    conversion_crd,
    size_and_replicas,
)
from watchkeeper.webhooks import CertificateManager, WebhookCerts, WebhookServer


async def test_a_conversion_webhook_that_is_down_fails_reads_and_writes_at_the_other_version(
    client: wk.Client, namespace: str,
) -> None:
    group = f"{namespace}.example.com"
    PartV1, PartV2 = size_and_replicas(group, "Part")
    name = f"parts.{group}"
    mgr = CertificateManager(client, WebhookCerts("hooks", namespace, local_hosts=True,
                                                  crds=(name,)))
    server = WebhookServer(mgr, port=0)
    server.conversion("/convert-parts", PartV1, PartV2)
    await server.start()
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    await crds.create(conversion_crd(group, "Part", "parts", {"v1": ANY_SPEC, "v2": ANY_SPEC},
                                     "v1", {"url": server.url + "/convert-parts"}))
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
        await v1.create(PartV1(metadata=wk.ObjectMeta(name="p"), spec=SizeSpec(size=2)))
        assert (await v2.get("p")).spec == ReplicasSpec(replicas=2)

        await server.stop()  # its port now refuses connections
        stopped = True
        prefix = f"conversion webhook for {group}/v1, Kind=Part failed: Post "
        with pytest.raises(wk.ServerError) as failed:
            await v2.get("p")
        assert failed.value.code == 500 and failed.value.message.startswith(prefix)
        assert "connect: connection refused" in failed.value.message
        with pytest.raises(wk.ServerError) as failed:
            await v2.create(PartV2(metadata=wk.ObjectMeta(name="q"),
                                   spec=ReplicasSpec(replicas=1)))
        assert failed.value.code == 500
        assert failed.value.message.startswith(f"conversion webhook for {group}/v2, Kind=Part")
        assert (await v1.get("p")).spec == SizeSpec(size=2)  # the stored version: no call
        assert [p.metadata.name for p in await v1.list()] == ["p"]  # q was not written
    finally:
        with contextlib.suppress(wk.NotFound):
            await crds.delete(name)
        if not stopped:
            await server.stop()
