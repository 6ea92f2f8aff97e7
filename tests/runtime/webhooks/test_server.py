"""The webhook server over HTTPS on loopback: certificates from the ``CertificateManager``
against the simulator, a client that trusts only its CA bundle. The mutating review's patch
is applied by the simulator (an RFC 6902 implementation of its own) to the object the
review carried: the stored result is the handler's."""

from __future__ import annotations

import asyncio
import base64
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
    Denied,
    WebhookCerts,
    WebhookServer,
)
from watchkeeper_sim import ApiServer

from ..typed.versions import SiteV1, SiteV1alpha1

NS = "default"


class Hooks:
    """A server with one handler of each kind, and a client that trusts its CA."""

    def __init__(self, server: WebhookServer, ca: bytes) -> None:
        self.server = server
        self.ssl = ssl.create_default_context(cadata=ca.decode())
        self.release = asyncio.Event()
        self.effects: list[str] = []

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as s, s.post(
                self.server.url + path, json=body, ssl=self.ssl) as r:
            return r.status, await r.json(content_type=None)


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[wk.Client]:
    async with apiserver.client() as c:
        yield c


@pytest.fixture
async def hooks(client: wk.Client) -> AsyncIterator[Hooks]:
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, local_hosts=True))
    await mgr.ensure()
    server = WebhookServer(mgr.tls, port=0, drain_timeout=5.0)
    h = Hooks(server, mgr.ca_bundle)

    @server.validating("/validate-cm")
    async def validate(req: AdmissionRequest[Any]) -> None:
        if not req.dry_run:
            h.effects.append(req.uid)
        if (req.object or {}).get("data", {}).get("mode") not in ("slow", "fast"):
            raise Denied("data.mode must be slow or fast")

    @server.mutating("/mutate-cm", model=wk.k8s.ConfigMap)
    async def mutate(req: AdmissionRequest[wk.k8s.ConfigMap]) -> wk.k8s.ConfigMap:
        cm = req.object
        assert cm is not None
        cm.data = {**{k: v for k, v in (cm.data or {}).items() if k != "drop"}, "owner": "a/b"}
        cm.metadata.labels = {**cm.metadata.labels, "team": "x"}
        return cm

    @server.validating("/broken")
    async def broken(req: AdmissionRequest[Any]) -> None:
        raise ZeroDivisionError("division by zero")

    @server.validating("/slow", timeout=0.2)
    async def slow(req: AdmissionRequest[Any]) -> None:
        await asyncio.sleep(30)

    @server.validating("/held")
    async def held(req: AdmissionRequest[Any]) -> None:
        await h.release.wait()

    server.conversion("/convert-sites", SiteV1alpha1, SiteV1)
    await server.start()
    try:
        yield h
    finally:
        await server.stop()


def review(obj: dict[str, Any], *, uid: str = "u", dry_run: bool = False) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "namespace": NS,
                        "name": obj["metadata"]["name"], "object": obj, "dryRun": dry_run}}


async def test_a_mutating_reviews_patch_applied_to_the_object_gives_the_handlers_result(
    hooks: Hooks, client: wk.Client,
) -> None:
    cms = client.api("configmaps", NS)
    obj = await cms.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm", "labels": {"app": "web"}},
                            "data": {"mode": "fast", "drop": "me"}})
    status, out = await hooks.post("/mutate-cm", review(obj, uid="m-1"))
    assert status == 200 and out["response"]["uid"] == "m-1"
    assert out["response"]["allowed"] is True
    assert out["response"]["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(out["response"]["patch"]))
    patched = await cms.patch("cm", patch, type="json")
    assert patched["data"] == {"mode": "fast", "owner": "a/b"}
    assert patched["metadata"]["labels"] == {"app": "web", "team": "x"}


async def test_a_denial_reaches_the_client_with_its_message(hooks: Hooks) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "data": {"mode": "warp"}}
    status, out = await hooks.post("/validate-cm", review(cm, uid="v-1"))
    assert status == 200
    assert out["response"] == {"uid": "v-1", "allowed": False, "status": {
        "code": 403, "message": "data.mode must be slow or fast"}}


async def test_a_dry_run_reaches_the_handler(hooks: Hooks) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "data": {"mode": "slow"}}
    for uid, dry in (("dry", True), ("wet", False)):
        status, out = await hooks.post("/validate-cm", review(cm, uid=uid, dry_run=dry))
        assert (status, out["response"]["allowed"]) == (200, True)
    assert hooks.effects == ["wet"]


async def test_a_handler_that_raises_denies_and_is_counted(hooks: Hooks) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    status, out = await hooks.post("/broken", review(cm, uid="b-1"))
    assert status == 200
    assert out["response"] == {"uid": "b-1", "allowed": False, "status": {
        "code": 500,
        "message": "admission webhook /broken failed: ZeroDivisionError: division by zero"}}
    assert hooks.server.status()["handlers"]["/broken"] == {
        "requests": 1, "denials": 1, "errors": 1}


async def test_a_handler_past_its_timeout_denies(hooks: Hooks) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    status, out = await asyncio.wait_for(hooks.post("/slow", review(cm)), 5)
    assert status == 200 and out["response"]["allowed"] is False
    assert out["response"]["status"]["message"] == "admission webhook /slow timed out after 0.2s"


async def test_a_conversion_review_round_trip(hooks: Hooks) -> None:
    site = {"apiVersion": "versions.example.com/v1alpha1", "kind": "Site",
            "metadata": {"name": "s", "namespace": NS},
            "spec": {"image": "nginx:1.25", "replicas": 3, "debug": True}}
    status, out = await hooks.post("/convert-sites", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": "versions.example.com/v1",
                    "objects": [site]}})
    assert status == 200 and out["response"]["result"] == {"status": "Success"}
    (v1,) = out["response"]["convertedObjects"]
    assert v1["apiVersion"] == "versions.example.com/v1"
    assert v1["spec"] == {"image": "nginx:1.25", "replicas": 3}
    _, back = await hooks.post("/convert-sites", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-2", "desiredAPIVersion": "versions.example.com/v1alpha1",
                    "objects": [v1]}})
    assert back["response"]["uid"] == "c-2"
    assert back["response"]["convertedObjects"] == [site]


async def test_a_body_that_is_no_review_is_a_bad_request(hooks: Hooks) -> None:
    status, out = await hooks.post("/validate-cm", {"kind": "AdmissionReview"})
    assert status == 400 and "request.uid" in out["error"]


async def test_stop_drains_the_review_in_flight_and_refuses_new_connections(
    hooks: Hooks,
) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    in_flight = asyncio.create_task(hooks.post("/held", review(cm, uid="h-1")))
    while hooks.server.in_flight == 0:
        await asyncio.sleep(0.01)
    stopping = asyncio.create_task(hooks.server.stop())
    await asyncio.sleep(0.2)
    assert not stopping.done() and not in_flight.done()  # waiting for the review
    with pytest.raises(aiohttp.ClientConnectorError):
        await hooks.post("/validate-cm", review(cm))
    hooks.release.set()
    status, out = await in_flight
    assert (status, out["response"]["uid"], out["response"]["allowed"]) == (200, "h-1", True)
    await stopping
    assert not hooks.server.serving


async def test_the_review_of_a_large_object_is_answered(hooks: Hooks) -> None:
    """An UPDATE of a 1.4 MiB ConfigMap carries it twice: about 2.8 MiB of review."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
          "data": {"mode": "slow", "blob": "x" * (1400 * 1024)}}
    body = review(cm, uid="big-1")
    body["request"].update(operation="UPDATE", oldObject=cm)
    status, out = await hooks.post("/validate-cm", body)
    assert status == 200 and out["response"] == {"uid": "big-1", "allowed": True}
