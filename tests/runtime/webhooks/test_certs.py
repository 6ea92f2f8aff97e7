"""The webhook certificate manager against the simulator, with real TLS over loopback.

The clock is injected. ``ssl`` checks validity against the real clock, so the CA rotation
scenario starts 20 days in the past and ends a few minutes before now: every certificate it
issues is valid at the real moment of each handshake.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import ssl
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.webhooks import CertificateManager, Lifetimes, WebhookCerts, pki
from watchkeeper.webhooks.tls import ServingTLS
from watchkeeper_sim import ApiServer

NS = "default"
HOST = f"hooks.{NS}.svc"


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, delta: dt.timedelta) -> None:
        self.now += delta


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[wk.Client]:
    async with apiserver.client() as c:
        yield c


async def tls_server(tls: ServingTLS) -> tuple[asyncio.Server, int]:
    async def handle(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls.server_context())
    return server, server.sockets[0].getsockname()[1]


async def handshake(port: int, bundle: bytes, host: str = HOST) -> bytes | None:
    """The served certificate (DER) if a client trusting ``bundle`` accepts it, else None."""
    ctx = ssl.create_default_context(cadata=bundle.decode())
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=host)
    except ssl.SSLCertVerificationError:
        return None
    der = w.get_extra_info("ssl_object").getpeercert(binary_form=True)
    w.close()
    await r.read()
    return bytes(der)


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


async def secret_data(client: wk.Client, name: str = "hooks-tls") -> dict[str, bytes]:
    obj = await client.api("secrets", NS).get(name)
    assert obj["type"] == "kubernetes.io/tls"
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


async def test_two_replicas_starting_at_once_agree_on_one_secret(
    client: wk.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "watchkeeper.webhooks")
    config = WebhookCerts("hooks", NS, local_hosts=True)
    managers = [CertificateManager(client, config) for _ in range(3)]
    states = await asyncio.gather(*(m.ensure() for m in managers))
    data = await secret_data(client)
    for m, state in zip(managers, states, strict=True):
        assert m.tls.cert_pem == state.serving.cert_pem == data["tls.crt"]
        assert m.ca_bundle == data["ca.crt"]
    # one create won, the others met AlreadyExists and adopted it
    wrote = [r for r in caplog.records if "webhook certificates in" in r.getMessage()]
    adopted = [r for r in caplog.records if "written by another replica" in r.getMessage()]
    assert len(wrote) == 1 and len(adopted) == 2
    cert = pki.info(data["tls.crt"])
    assert cert.hosts == {"hooks", "hooks.default", "hooks.default.svc",
                          "hooks.default.svc.cluster.local", "localhost", "127.0.0.1"}
    assert all(data["tls.key"] not in r.getMessage().encode() for r in caplog.records)
    server, port = await tls_server(managers[1].tls)
    async with server:
        assert await handshake(port, data["ca.crt"], "127.0.0.1") == der(data["tls.crt"])


async def test_the_serving_cert_rotates_when_a_third_of_its_life_remains(
    client: wk.Client,
) -> None:
    clock = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(days=300))
    mgr = CertificateManager(client, WebhookCerts("hooks", NS), clock=clock)
    first = (await mgr.ensure()).serving.cert_pem
    cert = pki.info(first)
    due = cert.not_after - (cert.not_after - cert.not_before) / 3
    clock.now = due - dt.timedelta(seconds=1)
    assert (await mgr.ensure()).serving.cert_pem == first
    clock.now = due + dt.timedelta(seconds=1)
    second = (await mgr.ensure()).serving.cert_pem
    assert second != first
    assert pki.info(second).not_before == clock.now - dt.timedelta(minutes=5)
    assert (await secret_data(client))["tls.crt"] == second
    # the CA did not move: the bundle is the same one CA
    assert len(pki.split_bundle(mgr.ca_bundle)) == 1


async def test_a_ca_rotation_keeps_every_recent_bundle_working_at_each_step(
    client: wk.Client,
) -> None:
    lt = Lifetimes(ca=dt.timedelta(days=30), serving=dt.timedelta(days=30),
                   overlap=dt.timedelta(seconds=60))
    real = dt.datetime.now(dt.UTC)
    clock = Clock(real - dt.timedelta(days=20, minutes=10))
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, lifetimes=lt), clock=clock)
    state = await mgr.ensure()
    server, port = await tls_server(mgr.tls)
    async with server:
        b0 = mgr.ca_bundle
        (ca_a,) = pki.split_bundle(b0)
        assert await handshake(port, b0) == der(mgr.tls.cert_pem)

        # just before A has a third of its life left: nothing changes
        due = ca_a.not_after - (ca_a.not_after - ca_a.not_before) / 3
        clock.now = due - dt.timedelta(seconds=1)
        assert (await mgr.ensure()) == state

        # A nears its end: B joins the bundle; the serving cert (at its own end too: same
        # lifetime) is re-issued, still under A, so a client holding only [A] accepts it
        clock.now = due + dt.timedelta(seconds=1)
        state = await mgr.ensure()
        b1 = mgr.ca_bundle
        ca_a2, ca_b = pki.split_bundle(b1)
        assert ca_a2.pem == ca_a.pem and ca_b.not_before > ca_a.not_before
        served = pki.info(mgr.tls.cert_pem)
        assert served.issuer_key == ca_a.key_id and served.not_after <= ca_a.not_after
        assert await handshake(port, b0) == await handshake(port, b1) == der(served.pem)
        a_signed = state.serving  # a replica that has not reloaded yet keeps serving this

        # within the overlap: still A
        clock.advance(dt.timedelta(seconds=59))
        assert (await mgr.ensure()) == state
        assert await handshake(port, b0) == der(served.pem)

        # the overlap passed: B signs, the bundle stays [A, B]
        clock.advance(dt.timedelta(seconds=1))
        await mgr.ensure()
        assert mgr.ca_bundle == b1
        served_b = pki.info(mgr.tls.cert_pem)
        assert served_b.issuer_key == ca_b.key_id
        assert await handshake(port, b1) == der(served_b.pem)
        # a client still holding [A] only now fails: it had one overlap to get [A, B]
        assert await handshake(port, b0) is None
        # and a replica still serving the A-signed cert is accepted by [A, B]
        lagging = ServingTLS()
        lagging.update(a_signed.cert_pem, a_signed.key_pem)
        lag_server, lag_port = await tls_server(lagging)
        async with lag_server:
            assert await handshake(lag_port, b1) == der(served.pem)

        # one more overlap (every replica reloaded): A leaves the bundle
        clock.advance(dt.timedelta(seconds=59))
        await mgr.ensure()
        assert mgr.ca_bundle == b1
        clock.advance(dt.timedelta(seconds=1))
        await mgr.ensure()
        b2 = mgr.ca_bundle
        assert [c.pem for c in pki.split_bundle(b2)] == [ca_b.pem]
        assert mgr.tls.cert_pem == served_b.pem  # the serving cert did not move
        assert await handshake(port, b1) == await handshake(port, b2) == der(served_b.pem)
        data = await secret_data(client)
        assert data["ca.crt"] == b2 and "ca-next.key" not in data


async def test_another_replica_picks_up_a_rotation_without_restarting(
    client: wk.Client,
) -> None:
    real = dt.datetime.now(dt.UTC)
    clock = Clock(real - dt.timedelta(days=260))
    config = WebhookCerts("hooks", NS)
    writer = CertificateManager(client, config, clock=clock)
    await writer.ensure()
    # the reader's clock stays where its own rules find nothing to rotate
    reader = CertificateManager(client, config, interval=0.05,
                                clock=Clock(real - dt.timedelta(days=250)))
    async with wk.Supervisor("test") as sup:
        reader.start(sup)
        server, port = await tls_server(reader.tls)
        async with server:
            while not reader.tls.cert_pem:
                await asyncio.sleep(0.01)
            first = reader.tls.cert_pem
            assert await handshake(port, reader.ca_bundle) == der(first)
            clock.now = real  # 260 days: past two thirds of a year
            rotated = (await writer.ensure()).serving.cert_pem
            assert rotated != first
            async with asyncio.timeout(10):
                while reader.tls.cert_pem != rotated:
                    await asyncio.sleep(0.01)
            assert await handshake(port, reader.ca_bundle) == der(rotated)


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.certs.example.com"},
    "spec": {
        "group": "certs.example.com", "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{"name": v, "served": True, "storage": v == "v1",
                      "schema": {"openAPIV3Schema": {"type": "object"}}} for v in ("v1", "v2")],
        "conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": NS, "name": "hooks", "path": "/convert",
                                         "port": 443}}}},
    },
}


async def test_the_ca_bundle_is_patched_into_a_crds_conversion_webhook_once(
    client: wk.Client,
) -> None:
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    await crds.create(CRD)
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, crds=(CRD["metadata"]["name"],)))
    await mgr.ensure()
    assert await mgr.publish() == 1
    crd = await crds.get(CRD["metadata"]["name"])
    got = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    assert base64.b64decode(got["caBundle"]) == mgr.ca_bundle
    assert got["service"]["name"] == "hooks"  # the merge patch kept the rest
    rv = crd["metadata"]["resourceVersion"]
    assert await mgr.publish() == 0  # unchanged: no write at all
    assert (await crds.get(CRD["metadata"]["name"]))["metadata"]["resourceVersion"] == rv


def test_lifetimes_whose_ca_rotation_would_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="two overlaps"):
        Lifetimes(ca=dt.timedelta(days=3), overlap=dt.timedelta(days=1))
    with pytest.raises(ValueError, match="rotate_fraction"):
        Lifetimes(rotate_fraction=1.0)


async def test_a_context_from_pem_leaves_no_key_file_behind(
    client: wk.Client, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkstemp writes
    mgr = CertificateManager(client, WebhookCerts("hooks", NS))
    await mgr.ensure()
    assert list(tmp_path.iterdir()) == []
    server, port = await tls_server(mgr.tls)
    async with server:
        assert await handshake(port, mgr.ca_bundle) == der(mgr.tls.cert_pem)


async def test_a_next_ca_key_whose_ca_left_the_bundle_is_dropped(client: wk.Client) -> None:
    mgr = CertificateManager(client, WebhookCerts("hooks", NS))
    state = await mgr.ensure()
    stray = pki.new_ca("stray", dt.datetime.now(dt.UTC), dt.timedelta(days=30))
    await client.api("secrets", NS).patch(
        "hooks-tls", {"data": {"ca-next.key": base64.b64encode(stray.key_pem).decode()}})
    after = await mgr.ensure()
    assert after.next_ca_key is None and after.serving == state.serving
    assert "ca-next.key" not in await secret_data(client)
