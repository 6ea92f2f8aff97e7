"""A serving-certificate rotation while reviews flow: none of them fails.

Reviews go at 50 a second for 3 s, each on a new TLS connection (so every one is a handshake
against whatever certificate the server holds then), from a client that trusts the CA
bundle; halfway the manager's clock passes the rotation mark and it issues a new serving
certificate, which the server takes at the next handshake without a restart."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import watchkeeper as wk
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    WebhookCerts,
    WebhookServer,
    pki,
)
from watchkeeper_sim import ApiServer

from .test_certs import Clock

pytestmark = pytest.mark.realtime

NS = "default"
RATE = 50  # reviews a second
SECONDS = 3.0


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[wk.Client]:
    async with apiserver.client() as c:
        yield c


def review(i: int) -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": f"cm{i}", "namespace": NS}, "data": {"n": str(i)}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": f"u{i}", "operation": "CREATE", "namespace": NS,
                        "name": f"cm{i}", "object": obj}}


async def test_a_serving_rotation_while_50_reviews_a_second_flow_fails_none(
    client: wk.Client,
) -> None:
    clock = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(days=300))
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, local_hosts=True), clock=clock)
    first = (await mgr.ensure()).serving.cert_pem
    server = WebhookServer(mgr.tls, port=0, drain_timeout=5.0)

    @server.validating("/validate")
    async def validate(req: AdmissionRequest[Any]) -> None:
        return None

    trust = ssl.create_default_context(cadata=mgr.ca_bundle.decode())
    outcomes: list[tuple[int, bool]] = []

    async def served_cert() -> bytes:
        """The certificate a new handshake gets now (DER)."""
        _, writer = await asyncio.open_connection(server.host, server.port, ssl=trust)
        try:
            peer = writer.get_extra_info("ssl_object")
            return bytes(peer.getpeercert(binary_form=True))
        finally:
            writer.close()

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        try:
            async with session.post(server.url + "/validate", json=review(i),
                                    ssl=trust) as resp:
                body = await resp.json(content_type=None)
                outcomes.append((resp.status, bool(body["response"]["allowed"])))
        except Exception as exc:  # a failed review is what this test looks for
            outcomes.append((0, False))
            raise AssertionError(f"review {i} failed: {type(exc).__name__}: {exc}") from exc

    await server.start()
    try:
        before = await served_cert()
        connector = aiohttp.TCPConnector(force_close=True)  # a handshake per review
        async with aiohttp.ClientSession(connector=connector) as session:
            tasks: list[asyncio.Task[None]] = []
            second = first
            total = int(RATE * SECONDS)
            for i in range(total):
                if i == total // 2:  # halfway: past the rotation mark, a new serving cert
                    cert = pki.info(first)
                    clock.now = cert.not_after - (cert.not_after - cert.not_before) / 4
                    second = (await mgr.ensure()).serving.cert_pem
                    assert second != first
                tasks.append(asyncio.create_task(one(session, i)))
                await asyncio.sleep(1 / RATE)
            results = await asyncio.gather(*tasks, return_exceptions=True)
        after = await served_cert()
    finally:
        await server.stop()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    assert len(outcomes) == total and all(o == (200, True) for o in outcomes)
    # the flow began on the first serving certificate and ended on the new one
    assert before == ssl.PEM_cert_to_DER_cert(first.decode())
    assert after == ssl.PEM_cert_to_DER_cert(second.decode())



Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class KeepAlive:
    """HTTP/1.1 over TLS on connections kept open between requests, as Go's client (so
    kube-apiserver's) keeps them: one that the server answers with ``Connection: close`` is
    closed and the next request opens a new one. Each answer comes with the certificate its
    connection got (aiohttp's client lets a finished response's connection go)."""

    def __init__(self, host: str, port: int, trust: ssl.SSLContext, size: int) -> None:
        self.host, self.port, self.trust = host, port, trust
        self.idle: asyncio.Queue[Conn | None] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(None)

    async def post(self, path: str, review: dict[str, Any]) -> tuple[int, Any, bytes]:
        """The status, the JSON answer and the server's certificate (DER)."""
        body = json.dumps(review).encode()
        conn = await self.idle.get()
        try:
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port, ssl=self.trust)
            reader, writer = conn
            writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                         f"Content-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in head[1:] if line)
            data = await reader.readexactly(int(headers["content-length"]))
            cert = bytes(writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
            if headers.get("connection") == "close":
                writer.close()
                conn = None
            return int(head[0].split()[1]), json.loads(data), cert
        except BaseException:
            if conn is not None:
                conn[1].close()
                conn = None
            raise
        finally:
            self.idle.put_nowait(conn)

    def close(self) -> None:
        while not self.idle.empty():
            conn = self.idle.get_nowait()
            if conn is not None:
                conn[1].close()


async def test_after_a_rotation_kept_alive_connections_move_to_the_new_certificate(
    client: wk.Client,
) -> None:
    """kube-apiserver keeps its connection to a webhook open for good: the server closes a
    connection of the old certificate after its next answer, so the reviews that follow
    come over a new handshake with the new certificate, and none fails."""
    clock = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(days=300))
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, local_hosts=True), clock=clock)
    first = (await mgr.ensure()).serving.cert_pem
    server = WebhookServer(mgr.tls, port=0, drain_timeout=5.0)

    @server.validating("/validate")
    async def validate(req: AdmissionRequest[Any]) -> None:
        return None

    trust = ssl.create_default_context(cadata=mgr.ca_bundle.decode())
    # per review, in the order sent: status, allowed, the certificate of its connection
    outcomes: dict[int, tuple[int, bool, bytes]] = {}

    async def one(i: int) -> None:
        status, body, cert = await http.post("/validate", review(i))
        outcomes[i] = (status, bool(body["response"]["allowed"]), cert)

    total = int(RATE * SECONDS)
    await server.start()
    http = KeepAlive(server.host, server.port, trust, size=4)
    try:
        tasks: list[asyncio.Task[None]] = []
        second = first
        for i in range(total):
            if i == total // 2:
                cert = pki.info(first)
                clock.now = cert.not_after - (cert.not_after - cert.not_before) / 4
                second = (await mgr.ensure()).serving.cert_pem
                assert second != first
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(1 / RATE)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        http.close()
        await server.stop()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    assert all(outcomes[i][:2] == (200, True) for i in range(total))
    old, new = (ssl.PEM_cert_to_DER_cert(c.decode()) for c in (first, second))
    assert {outcomes[i][2] for i in range(total // 2)} == {old}
    # the first review on each connection opened before the rotation still gets the old
    # certificate (at most 4); every one sent half a second later gets the new one
    assert {outcomes[i][2] for i in range(total // 2 + RATE // 2, total)} == {new}
