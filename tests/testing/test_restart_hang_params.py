"""A data-losing restart sends 410 to resuming watches; hang(count=N) hangs N requests; the
``watch`` query parameter is read like the apiserver's parameter codec (issue 10, item 14)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

import watchkeeper as wk
from watchkeeper.testing import ApiServer

from ._util import cm, open_watch

CMS = "/api/v1/namespaces/default/configmaps"


async def test_a_caught_up_watch_gets_410_after_a_restart_that_lost_the_data(
        apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    latest = apiserver.store.rv  # what a caught-up client resumes from
    await apiserver.restart(keep_data=False)
    w = await open_watch(session, apiserver, CMS, resourceVersion=latest)
    assert w.status == 200  # 200, then one ERROR line, then the end (062)
    lines = await w.rest()
    assert [ln["type"] for ln in lines] == ["ERROR"]
    status = lines[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == f"too old resource version: {latest} ({latest + 1})"
    # a resourceVersion the new server issued is fine
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv,
                         timeoutSeconds=1)
    assert await w.rest() == []


async def test_a_restart_keeping_data_still_resumes_without_410(
        apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    latest = apiserver.store.rv
    await apiserver.restart()
    w = await open_watch(session, apiserver, CMS, resourceVersion=latest, timeoutSeconds=1)
    assert await w.rest() == []


@pytest.mark.looptime
async def test_reflector_store_ends_equal_to_the_wiped_server() -> None:
    async with ApiServer(bookmark_interval=30.0) as srv, srv.client() as client:
        api = client.api("configmaps", namespace="default")
        for name in ("a", "b", "c"):
            await api.create(cm(name))
        store, writer = wk.Store.new()
        w = wk.watcher(api, wk.WatchConfig(max_unhealthy=None))

        async def consume() -> None:
            async for _ in wk.reflector(writer, w):
                pass

        task = asyncio.create_task(consume())
        try:
            await store.wait_until_ready(timeout=10)
            assert sorted(wk.meta.name(o) for o in store) == ["a", "b", "c"]
            await asyncio.sleep(1)  # caught up: the watch is open at the latest RV
            await srv.restart(keep_data=False)
            async with asyncio.timeout(60):
                while len(store):
                    await asyncio.sleep(0.05)
            server_names = [wk.meta.name(o) for o in (await api.list()).items]
            assert server_names == [] and [wk.meta.name(o) for o in store] == []
            assert "Gone" in w.health.errors
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _raw_get(srv: ApiServer, path: str) -> bytes:
    """One GET on its own connection, read to EOF: b"" when the server dropped it unanswered
    (a raw socket, since aiohttp would silently retry a dropped idempotent request)."""
    reader, writer = await asyncio.open_connection(srv.host, srv.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     f"Authorization: Bearer {srv.token()}\r\n\r\n".encode())
        await writer.drain()
        return await reader.read()
    finally:
        writer.close()


async def test_hang_with_count_hangs_that_many_requests(apiserver: ApiServer) -> None:
    fault = apiserver.faults.hang(count=2, path_prefix=CMS)
    hung = [asyncio.create_task(_raw_get(apiserver, CMS)) for _ in range(2)]
    await asyncio.sleep(0.3)
    assert not any(t.done() for t in hung)  # hanging, not reset
    served = await asyncio.wait_for(_raw_get(apiserver, CMS), 3)  # the third is served
    assert served.startswith(b"HTTP/1.1 200")
    await asyncio.sleep(0.3)
    assert not any(t.done() for t in hung)  # a used-up count does not let them go
    assert [r.fault for r in apiserver.requests] == ["hang", "hang", None]
    apiserver.faults.remove(fault)
    assert await asyncio.wait_for(asyncio.gather(*hung), 3) == [b"", b""]  # dropped


async def test_hang_with_duration_lets_go_when_it_ends(apiserver: ApiServer) -> None:
    apiserver.faults.hang(count=1, duration=0.4, path_prefix=CMS)
    t = asyncio.create_task(_raw_get(apiserver, CMS))
    await asyncio.sleep(0.2)
    assert not t.done()
    assert await asyncio.wait_for(t, 3) == b""


@pytest.mark.parametrize("value", ["yes", "on", "", "true", "True", "1", "t", "2", "nope"])
async def test_watch_parameter_values_that_mean_watch(
        apiserver: ApiServer, session: aiohttp.ClientSession, value: str) -> None:
    # apimachinery's Convert_Slice_string_To_bool: only "0" and "false" (any case) are false
    w = await open_watch(session, apiserver, CMS, watch=value, timeoutSeconds=1)
    assert w.status == 200
    assert w.headers.get("Transfer-Encoding") == "chunked"
    await w.rest()
    assert apiserver.requests[-1].verb == "watch"


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "False", "fAlSe"])
async def test_watch_parameter_values_that_mean_list(
        apiserver: ApiServer, req, value: str) -> None:
    status, body, _ = await req("GET", CMS, params={"watch": value})
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert apiserver.requests[-1].verb == "list"


async def test_allow_watch_bookmarks_is_read_the_same_way(
        apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    srv = ApiServer(bookmark_interval=0.2)
    async with srv:
        w = await open_watch(session, srv, CMS, resourceVersion=srv.store.rv,
                             allowWatchBookmarks="yes", timeoutSeconds=1)
        assert "BOOKMARK" in [ln["type"] for ln in await w.rest()]


async def test_a_data_losing_restart_starts_with_the_configured_namespaces() -> None:
    srv = ApiServer(namespaces=("default", "team-a"))
    async with srv:
        srv.create_object(cm("gone", ns="team-a"))
        await srv.restart(keep_data=False)
        names = sorted(o["metadata"]["name"] for o in srv.store.objects(
            srv.resource("v1", "namespaces")))
        assert names == ["default", "team-a"]
        assert srv.store.objects(srv.resource("v1", "configmaps")) == []
