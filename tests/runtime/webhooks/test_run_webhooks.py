"""``wk.run(..., webhooks=...)``: the webhook server (and its certificate manager) under the
run's supervisor, on a replica that does not lead, shown in /readyz and /metrics, and
drained on stop: the review in flight is answered before ``run`` returns."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

import watchkeeper as wk
from watchkeeper.ops.status import print_status
from watchkeeper.webhooks import (
    AdmissionRequest,
    CertificateManager,
    Denied,
    WebhookCerts,
    WebhookServer,
)
from watchkeeper_sim import ApiServer

NS = "default"


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[wk.Client]:
    async with apiserver.client() as c:
        yield c


def review(uid: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "object": {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}}}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def test_run_serves_webhooks_on_a_follower_reports_them_and_drains_on_stop(
    client: wk.Client, capsys: pytest.CaptureFixture[str],
) -> None:
    leases = client.api("leases.coordination.k8s.io", namespace=NS)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await leases.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": "op"},
                         "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                                  "acquireTime": now, "renewTime": now}})
    elector = wk.LeaderElector(leases, "op", identity="me")
    op = wk.Operator(wk.Controller(client.api("configmaps", namespace=NS)),
                     lambda obj, ctx: wk.Action.await_change())
    mgr = CertificateManager(client, WebhookCerts("hooks", NS, local_hosts=True))
    hooks = WebhookServer(mgr, port=0, drain_timeout=10.0)
    release = asyncio.Event()

    @hooks.validating("/deny")
    async def deny(req: AdmissionRequest[Any]) -> None:
        raise Denied("no")

    @hooks.validating("/held")
    async def held(req: AdmissionRequest[Any]) -> None:
        await release.wait()

    probes, stop = wk.HealthServer(), asyncio.Event()
    run = asyncio.create_task(wk.run(op, probes=probes, leader_election=elector,
                                     webhooks=hooks, stop=stop, handle_signals=False))
    async with asyncio.timeout(30):
        while not hooks.serving:
            await asyncio.sleep(0.05)
    ctx = ssl.create_default_context(cadata=mgr.ca_bundle.decode())
    async with aiohttp.ClientSession() as s:
        async with s.post(hooks.url + "/deny", json=review("d-1"), ssl=ctx) as r:
            body = await r.json()
        assert body["response"]["allowed"] is False and not elector.is_leader
        async with s.get(probes.url + "/readyz?verbose") as r:
            ready = await r.json(content_type=None)
        (webhooks,) = ready["webhooks"]
        assert webhooks["ready"] is True
        assert webhooks["handlers"]["/deny"] == {"requests": 1, "denials": 1, "errors": 0}
        assert all("handlers" not in w for w in ready["watches"])
        async with s.get(probes.url + "/metrics") as r:
            m = samples(await r.text())
        labels = (("path", "/deny"), ("type", "validating"))
        assert m[("watchkeeper_webhook_requests_total", labels)] == 1
        assert m[("watchkeeper_webhook_denials_total", labels)] == 1
        assert m[("watchkeeper_webhook_errors_total", labels)] == 0
        assert m[("watchkeeper_webhook_duration_seconds_count", labels)] == 1
        (sup,) = probes.sources.supervisors
        assert {"webhook server", "webhook certificates"} <= {t.name for t in sup.statuses()}
        assert await print_status(probes.url) == 0
        out = capsys.readouterr().out
        assert f"webhook server {hooks.url}: healthy, 0 in flight" in " ".join(out.split())
        assert re.search(r"/deny\s*│\s*1\s*│\s*1\s*│\s*0", out), out

        in_flight = asyncio.create_task(s.post(hooks.url + "/held", json=review("h-1"),
                                               ssl=ctx))
        async with asyncio.timeout(10):
            while hooks.in_flight == 0:
                await asyncio.sleep(0.01)
        stop.set()
        await asyncio.sleep(0.3)
        assert not run.done() and not hooks.serving  # no new connections, still draining
        release.set()
        async with await in_flight as r:
            assert r.status == 200 and (await r.json())["response"]["uid"] == "h-1"
    await asyncio.wait_for(run, 20)
    assert hooks.in_flight == 0 and not elector.is_leader


async def test_run_with_webhooks_alone(client: wk.Client) -> None:
    ctx_mgr = CertificateManager(client, WebhookCerts("solo", NS, local_hosts=True))
    hooks = WebhookServer(ctx_mgr, port=0)

    @hooks.mutating("/label")
    async def label(req: AdmissionRequest[Any]) -> dict[str, Any]:
        return {**(req.object or {}), "data": {"x": "1"}}

    stop = asyncio.Event()
    run = asyncio.create_task(wk.run(webhooks=hooks, stop=stop, handle_signals=False))
    async with asyncio.timeout(30):
        while not hooks.serving:
            await asyncio.sleep(0.05)
    ssl_ctx = ssl.create_default_context(cadata=ctx_mgr.ca_bundle.decode())
    async with aiohttp.ClientSession() as s, s.post(
            hooks.url + "/label", json=review("l-1"), ssl=ssl_ctx) as r:
        assert (await r.json())["response"]["patchType"] == "JSONPatch"
    stop.set()
    await asyncio.wait_for(run, 20)
    assert not hooks.serving


async def test_a_webhook_server_that_stops_listening_is_restarted_on_the_same_port(
    client: wk.Client,
) -> None:
    mgr = CertificateManager(client, WebhookCerts("again", NS, local_hosts=True))
    hooks = WebhookServer(mgr, port=0)

    @hooks.validating("/ok")
    async def ok(req: AdmissionRequest[Any]) -> None:
        return None

    probes, stop = wk.HealthServer(), asyncio.Event()
    run = asyncio.create_task(wk.run(webhooks=hooks, probes=probes, stop=stop,
                                     handle_signals=False, probe_check_interval=0.1))
    async with asyncio.timeout(30):
        while not hooks.serving:
            await asyncio.sleep(0.05)
    port = hooks.port
    assert hooks._site is not None and hooks._site._server is not None
    hooks._site._server.close()  # injected: the listener is gone (its socket closed)
    (sup,) = probes.sources.supervisors

    def status() -> Any:
        (st,) = [t for t in sup.statuses() if t.name == "webhook server"]
        return st

    async with asyncio.timeout(30):
        while not (hooks.serving and status().restarts == 1):
            await asyncio.sleep(0.05)
    assert "WebhookServerDown: the webhook server on" in status().describe()
    assert hooks.port == port
    await asyncio.sleep(1.5)
    assert status().restarts == 1  # (it does not crash again while stopping the dead one)
    ssl_ctx = ssl.create_default_context(cadata=mgr.ca_bundle.decode())
    async with aiohttp.ClientSession() as s, s.post(
            hooks.url + "/ok", json=review("r-1"), ssl=ssl_ctx) as r:
        assert (await r.json())["response"]["allowed"] is True
    stop.set()
    await asyncio.wait_for(run, 20)
