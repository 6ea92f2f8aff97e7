"""A serving-certificate rotation while kube-apiserver calls our validating webhook 50 times a
second fails none of the calls (issue 24: "a certificate rotation while 50 reviews a second
flow fails none of them").

The webhook configuration's clientConfig is a ``url:`` on this machine
(https://127.0.0.1:<port>, ``local_hosts``) with the caBundle the CertificateManager
publishes; the writes are server-side dry-run creates of ConfigMaps in the test namespace, 50
a second for 6 s. Halfway, the manager's clock passes the serving certificate's rotation mark
and ``sync`` (what its loop runs) issues a new serving certificate under the same CA: the
bundle, and so the API server's client for the webhook, stay as they are. kube-apiserver keeps
one keep-alive connection to the webhook, so the server closes a connection of the old
certificate after its next answer; the reviews that follow come over a new handshake.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

import watchkeeper as wk
from e2e.conftest import LABELS
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    Denied,
    WebhookCerts,
    WebhookServer,
    pki,
)

RATE = 50  # writes a second, so reviews a second
SECONDS = 6.0


class Clock:
    """The manager's clock, moved by the test to the rotation mark."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


class ObservedServer(WebhookServer):
    """The real server, with one observation added: the name in each review and the TLS
    context of the connection it came over (the context is the certificate's: the server
    hands a handshake the context of the certificate current then)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reviews: list[tuple[str, ssl.SSLContext]] = []

    async def _handle(self, request: web.Request) -> web.Response:
        assert request.transport is not None
        context = request.transport.get_extra_info("ssl_object").context
        review = json.loads(await request.read())  # (aiohttp keeps the body for the handler)
        self.reviews.append((review["request"].get("name") or "", context))
        return await super()._handle(request)


@pytest.fixture
async def hooks(client: wk.Client, namespace: str
                ) -> AsyncIterator[tuple[ObservedServer, CertificateManager, Clock]]:
    """The server and its manager, registered for ConfigMap creates in ``namespace``."""
    name = f"{namespace}-rotation"
    # a year's serving certificate issued 300 days ago, still valid now and after the rotation
    clock = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(days=300))
    mgr = CertificateManager(client, WebhookCerts("hooks", namespace, local_hosts=True,
                                                  validating=(name,)), clock=clock)
    server = ObservedServer(mgr, port=0)

    @server.validating("/validate-cm")
    async def validate(req: AdmissionRequest[Any]) -> None:
        if ((req.object or {}).get("data") or {}).get("probe") == "deny":
            raise Denied("a probe, denied")

    await server.start()
    vwcs = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
    await vwcs.create({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "webhooks": [{
            "name": "rotation.whk.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"url": server.url + "/validate-cm"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }]})
    try:
        await mgr.publish()
        yield server, mgr, clock
    finally:
        with contextlib.suppress(wk.NotFound):
            await vwcs.delete(name)
        await server.stop()


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def until_the_webhook_is_called(api: wk.Api) -> None:
    """The API server takes up a new webhook configuration within about a second."""
    async with asyncio.timeout(30):
        while True:
            try:
                await api.create(configmap("probe", probe="deny"), dry_run=True)
            except wk.ApiError as exc:
                if "a probe, denied" in str(exc):
                    return
            await asyncio.sleep(0.5)


async def open_loop(total: int, send: Callable[[int], Awaitable[None]],
                    halfway: Callable[[], Awaitable[None]]) -> tuple[list[Any], int]:
    """``send(i)`` at ``RATE`` a second whatever earlier ones do, ``halfway`` run beside them
    from the middle; the outcomes, and how many had been sent when ``halfway`` finished."""
    done_at: list[int] = []
    sent = 0

    async def rotate() -> None:
        await halfway()
        done_at.append(sent)

    tasks: list[asyncio.Task[Any]] = []
    start = time.monotonic()
    for i in range(total):
        if i == total // 2:
            tasks.append(asyncio.create_task(rotate()))
        await asyncio.sleep(max(0.0, start + i / RATE - time.monotonic()))
        tasks.append(asyncio.create_task(send(i)))
        sent = i + 1
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return results, done_at[0]


async def test_a_serving_rotation_while_the_api_server_calls_50_times_a_second_fails_none(
    client: wk.Client, namespace: str, hooks: tuple[ObservedServer, CertificateManager, Clock],
) -> None:
    server, mgr, clock = hooks
    api = client.api("configmaps", namespace)
    await until_the_webhook_is_called(api)
    old_context, old_cert, bundle = mgr.tls.current, mgr.tls.cert_pem, mgr.ca_bundle

    async def rotate() -> None:
        cert = pki.info(old_cert)
        clock.now = cert.not_after - (cert.not_after - cert.not_before) / 4
        await mgr.sync()

    async def send(i: int) -> None:
        await api.create(configmap(f"cm-{i}", n=str(i)), dry_run=True)

    total = int(RATE * SECONDS)
    results, rotated_at = await open_loop(total, send, rotate)

    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]  # none refused: a failed webhook call is a 500 here
    assert mgr.tls.cert_pem != old_cert and mgr.ca_bundle == bundle  # serving only, CA kept
    new_context = mgr.tls.current
    vwc = await client.api("validatingwebhookconfigurations.admissionregistration.k8s.io",
                           None).get(f"{namespace}-rotation")
    assert base64.b64decode(vwc["webhooks"][0]["clientConfig"]["caBundle"]) == bundle

    seen = {name: context for name, context in server.reviews if name.startswith("cm-")}
    assert set(seen) == {f"cm-{i}" for i in range(total)}  # the API server called for each
    # reviews sent half a second before the rotation came over the old certificate (one
    # still in flight at the rotation may open a connection of the new one: an HTTP/1.1
    # client, as the simulator is, opens one per concurrent call)
    before = [seen[f"cm-{i}"] for i in range(total // 2 - RATE // 2)]
    assert before and all(c is old_context for c in before)
    # after the rotation each connection of the old certificate carries one more review at
    # most; every review sent half a second later came over a handshake with the new one
    after = [seen[f"cm-{i}"] for i in range(rotated_at + RATE // 2, total)]
    assert after and all(c is new_context for c in after)
