"""Faults (Python API and admin endpoint), the request log, restarts."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .._util import auth, cm, open_watch

CMS = "/api/v1/namespaces/default/configmaps"


async def test_request_log_records_everything(apiserver: ApiServer, req,
                                              session: aiohttp.ClientSession) -> None:
    t0 = time.monotonic()
    await req("GET", CMS, params={"limit": "1"})
    await req("GET", f"{CMS}/missing")
    await req("GET", CMS, user=None, headers={"Authorization": "Bearer bad"})
    w = await open_watch(session, apiserver, CMS, timeoutSeconds=0.1)
    await w.rest()
    recs = apiserver.requests
    assert [(r.method, r.status, r.is_list, r.is_watch) for r in recs] == [
        ("GET", 200, True, False), ("GET", 404, False, False), ("GET", 401, True, False),
        ("GET", 200, False, True)]
    assert recs[0].query == {"limit": "1"} and recs[0].user == "admin"
    assert recs[2].user is None and recs[0].time >= t0 and recs[0].wall_time > 1e9
    assert apiserver.count(is_list=True) == 2
    assert apiserver.count(is_watch=True, since=t0) == 1
    assert apiserver.count(method="GET", status=404) == 1
    assert apiserver.connection_attempts >= 1


async def test_request_log_limit_keeps_the_newest_requests() -> None:
    with pytest.raises(ValueError, match="request_log_limit"):
        ApiServer(request_log_limit=0)
    async with ApiServer(request_log_limit=5) as srv, srv.client() as client:
        api = client.api("configmaps", namespace="default")
        for i in range(23):
            await api.list(limit=i + 1)
        limits = [r.query.get("limit") for r in srv.requests if r.is_list]
        assert 5 <= len(srv.requests) < 10  # trimmed to 5 whenever it reaches 10
        assert limits[-1] == "23" and limits == [str(n) for n in range(24 - len(limits), 24)]


async def test_error_and_throttle_faults(apiserver: ApiServer, req) -> None:
    f = apiserver.faults.error(503, count=2, path_prefix="/api/v1/namespaces/default")
    for _ in range(2):
        status, body, _ = await req("GET", CMS)
        assert status == 503 and body["kind"] == "Status" and body["code"] == 503
        assert body["reason"] == "ServiceUnavailable"
    assert f.fired == 2
    status, _, _ = await req("GET", CMS)
    assert status == 200
    apiserver.faults.throttle(retry_after=3, user="limited")
    status, body, headers = await req("GET", CMS)
    assert status == 200  # only "limited" is throttled
    status, body, headers = await req("GET", CMS, user="limited")
    assert status == 429 and headers["Retry-After"] == "3"
    assert body == "Too many requests, please try again later.\n"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert apiserver.requests[-1].fault == "throttle"
    apiserver.faults.clear()
    apiserver.faults.error(500, watch=True)
    status, _, _ = await req("GET", CMS)
    assert status == 200
    status, body, _ = await req("GET", CMS, params={"watch": "1"})
    assert status == 500 and body["reason"] == "InternalError"


async def test_a_plain_error_fault_has_no_status_and_keeps_to_its_path(
    apiserver: ApiServer, req
) -> None:
    """A gateway's or kube-aggregator's answer: the code and a text body, no Status; the
    path prefix confines it to one resource."""
    secrets = "/api/v1/namespaces/default/secrets"
    apiserver.faults.error(503, "service unavailable", plain=True, retry_after=7,
                           path_prefix=secrets)
    status, body, headers = await req("GET", secrets)
    assert (status, body) == (503, "service unavailable\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Retry-After"] == "7"
    status, _, _ = await req("GET", CMS)
    assert status == 200  # another resource is served
    apiserver.faults.clear()
    apiserver.faults.add("error", code=502, plain=True)  # as over the admin endpoint
    status, body, _ = await req("GET", CMS)
    assert (status, body) == (502, "bad gateway (injected fault)\n")
    assert apiserver.faults.describe()[0]["plain"] is True


async def test_slow_and_hang(apiserver: ApiServer, req, session: aiohttp.ClientSession) -> None:
    apiserver.faults.slow(0.2, count=1)
    t0 = time.monotonic()
    status, _, _ = await req("GET", "/version")
    assert status == 200 and time.monotonic() - t0 >= 0.2
    hang = apiserver.faults.hang(path_prefix="/api/v1/namespaces")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(req("GET", CMS), 0.3)
    assert apiserver.requests[-1].status is None and apiserver.requests[-1].fault == "hang"
    status, _, _ = await req("GET", "/version")  # not matching: served
    assert status == 200
    apiserver.faults.remove(hang)
    status, _, _ = await req("GET", CMS)
    assert status == 200


async def test_reset_watches_and_reset_fault(apiserver: ApiServer,
                                             session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv)
    await asyncio.sleep(0.05)
    apiserver.reset_watches()
    with pytest.raises(aiohttp.ClientPayloadError):
        await w.rest()
    apiserver.faults.reset(after_events=1, watch=True, count=1)
    apiserver.create_object(cm("a"))
    apiserver.create_object(cm("b"))
    w = await open_watch(session, apiserver, CMS, resourceVersion="0")
    first = await w.next()
    assert first is not None and first["type"] == "ADDED"
    with pytest.raises(aiohttp.ClientPayloadError):
        await w.rest()
    w = await open_watch(session, apiserver, CMS, resourceVersion="0", timeoutSeconds=0.2)
    assert len(await w.rest()) == 2  # count used up


async def test_garbage_and_truncate(apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    apiserver.faults.garbage(b"}}not json", count=1)
    w = await open_watch(session, apiserver, CMS, resourceVersion="0", timeoutSeconds=0.2)
    assert await w.raw() == b"}}not json\n"
    assert (await w.next())["type"] == "ADDED"  # type: ignore[index]
    apiserver.faults.truncate(count=1)
    w = await open_watch(session, apiserver, CMS, resourceVersion="0", timeoutSeconds=0.2)
    with pytest.raises(aiohttp.ClientPayloadError):
        await w.rest()


async def test_stall_keeps_stream_open_without_data(apiserver: ApiServer,
                                                    session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv)
    stall = apiserver.faults.stall(watch=True)
    apiserver.create_object(cm("late"))
    with pytest.raises(asyncio.TimeoutError):
        await w.next(timeout=0.3)
    apiserver.faults.remove(stall)
    ev = await w.next()
    assert ev is not None and ev["object"]["metadata"]["name"] == "late"
    w.close()


async def test_refuse_closes_and_reopens_same_port(apiserver: ApiServer, req) -> None:
    port = apiserver.port
    apiserver.faults.refuse()
    with pytest.raises(aiohttp.ClientConnectorError):
        await req("GET", "/version")
    apiserver.faults.clear()
    await asyncio.sleep(0.05)
    status, _, _ = await req("GET", "/version")
    assert status == 200 and apiserver.port == port


async def test_refuse_with_counting(apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.faults.refuse(count_refused=True)
    before = apiserver.connection_attempts
    for _ in range(3):
        with pytest.raises(aiohttp.ClientError):
            async with aiohttp.ClientSession() as s, s.get(apiserver.url + "/version"):
                pass
    assert apiserver.connection_attempts - before >= 3
    apiserver.faults.clear()
    async with session.get(apiserver.url + "/version") as r:
        assert r.status == 200


async def test_refuse_with_duration_expires(apiserver: ApiServer,
                                            session: aiohttp.ClientSession) -> None:
    apiserver.faults.refuse(duration=0.2)
    with pytest.raises(aiohttp.ClientConnectorError):
        async with session.get(apiserver.url + "/version"):
            pass
    await asyncio.sleep(0.35)
    async with session.get(apiserver.url + "/version") as r:
        assert r.status == 200


async def test_admin_endpoint(apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    base = apiserver.url + "/_sim"
    async with session.post(base + "/faults", json={"kind": "error", "code": 502, "count": 1,
                                                    "watch": False}) as r:
        assert r.status == 201
        fault = await r.json()
    async with session.get(base + "/faults") as r:
        assert [f["id"] for f in (await r.json())["faults"]] == [fault["id"]]
    async with session.get(apiserver.url + CMS, headers=auth(apiserver)) as r:
        assert r.status == 502
    async with session.post(base + "/faults", json={"kind": "nope"}) as r:
        assert r.status == 400
    async with session.post(base + "/faults", json={"kind": "slow", "delay": 0}) as r:
        fid = (await r.json())["id"]
    async with session.delete(f"{base}/faults/{fid}") as r:
        assert (await r.json())["faults"] == []
    apiserver.create_object(cm("a"))
    rv = apiserver.store.rv
    async with session.post(base + "/compact") as r:
        assert r.status == 200
    assert apiserver.store.history_start == rv
    async with session.get(base + "/requests") as r:
        reqs = (await r.json())["requests"]
        assert reqs[-1]["status"] == 502
    async with session.delete(base + "/faults") as r:
        assert r.status == 200


async def test_faults_compact(apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    rv = apiserver.store.rv
    apiserver.create_object(cm("b"))
    apiserver.faults.compact()
    w = await open_watch(session, apiserver, CMS, resourceVersion=rv)
    assert (await w.next())["type"] == "ERROR"  # type: ignore[index]


async def test_restart_keeps_port_and_data(apiserver: ApiServer, req,
                                           session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("kept"))
    port = apiserver.port
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv)
    await apiserver.restart()
    assert apiserver.port == port
    assert await w.rest() == []  # watches end at a restart
    status, _, _ = await req("GET", f"{CMS}/kept")
    assert status == 200
    await apiserver.restart(keep_data=False)
    status, _, _ = await req("GET", f"{CMS}/kept")
    assert status == 404
    status, _, _ = await req("GET", "/api/v1/namespaces/default")
    assert status == 200


async def test_refuse_drops_pooled_connections(apiserver: ApiServer,
                                               session: aiohttp.ClientSession) -> None:
    async with session.get(apiserver.url + "/version") as r:  # leaves a pooled connection
        assert r.status == 200
    apiserver.faults.refuse(count_refused=True)
    await asyncio.sleep(0.05)
    with pytest.raises(aiohttp.ClientError):
        async with session.get(apiserver.url + "/version"):
            pass
    apiserver.faults.clear()
    async with session.get(apiserver.url + "/version") as r:
        assert r.status == 200


async def test_admin_refuse_with_duration(apiserver: ApiServer,
                                          session: aiohttp.ClientSession) -> None:
    async with session.post(apiserver.url + "/_sim/faults",
                            json={"kind": "refuse", "duration": 0.2}) as r:
        assert r.status == 201
    with pytest.raises(aiohttp.ClientError):
        async with aiohttp.ClientSession() as s, s.get(apiserver.url + "/version"):
            pass
    await asyncio.sleep(0.35)
    async with aiohttp.ClientSession() as s, s.get(apiserver.url + "/version") as r:
        assert r.status == 200


async def test_root_ca_configmaps_appear_in_every_namespace_like_on_a_cluster() -> None:
    async with ApiServer(root_ca_configmaps=True, tls=True) as srv, srv.client() as client:
        await client.api("namespaces").create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}})
        for ns in ("default", "kube-system", "fresh"):
            items = (await client.api("configmaps", namespace=ns).list()).items
            assert [i["metadata"]["name"] for i in items] == ["kube-root-ca.crt"], ns
            assert items[0]["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    async with ApiServer() as plain, plain.client() as client:  # off by default
        assert (await client.api("configmaps", namespace="default").list()).items == []
