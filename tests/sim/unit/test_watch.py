"""Watches over HTTP: line shapes, RV semantics, 410, bookmarks, WatchList, selectors."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .._util import cm, open_watch

CMS = "/api/v1/namespaces/default/configmaps"


async def test_watch_from_rv_streams_live_events(apiserver: ApiServer,
                                                 session: aiohttp.ClientSession) -> None:
    rv = apiserver.store.rv
    w = await open_watch(session, apiserver, CMS, resourceVersion=rv, timeoutSeconds=2)
    assert w.status == 200 and w.headers["Content-Type"] == "application/json"
    assert w.headers["Transfer-Encoding"] == "chunked"
    apiserver.create_object(cm("w1"))
    ev = await w.next()
    assert ev is not None and ev["type"] == "ADDED"
    assert ev["object"]["kind"] == "ConfigMap" and ev["object"]["metadata"]["name"] == "w1"
    obj = ev["object"]
    obj["data"] = {"k": "v2"}
    apiserver.update_object(obj)
    apiserver.delete_object("v1", "ConfigMap", "w1")
    types = [(await w.next())["type"], (await w.next())["type"]]  # type: ignore[index]
    assert types == ["MODIFIED", "DELETED"]
    w.close()


async def test_raw_lines_are_compact_json(apiserver: ApiServer,
                                          session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    w = await open_watch(session, apiserver, CMS, resourceVersion="0", timeoutSeconds=1)
    line = await w.raw()
    assert line.startswith(b'{"type":"ADDED","object":{"kind":"ConfigMap"')
    assert line.endswith(b"}\n")
    w.close()


async def test_no_rv_and_rv0_send_initial_added(apiserver: ApiServer,
                                                session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("b"))
    apiserver.create_object(cm("a"))
    for rv in ("", "0"):
        params = {"timeoutSeconds": 0.3}
        if rv:
            params["resourceVersion"] = rv
        w = await open_watch(session, apiserver, CMS, **params)
        events = await w.rest()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "a"), ("ADDED", "b")]


async def test_replay_after_rv_and_deprecated_paths(apiserver: ApiServer,
                                                    session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    rv = apiserver.store.rv
    apiserver.create_object(cm("b"))
    apiserver.delete_object("v1", "ConfigMap", "a")
    w = await open_watch(session, apiserver, CMS, resourceVersion=rv, timeoutSeconds=0.3)
    events = await w.rest()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("DELETED", "a")]
    w = await open_watch(session, apiserver, "/api/v1/watch/namespaces/default/configmaps",
                         watch=None, timeoutSeconds=0.3)
    assert [e["object"]["metadata"]["name"] for e in await w.rest()] == ["b"]
    apiserver.create_object(cm("c"))
    w = await open_watch(session, apiserver, "/api/v1/watch/namespaces/default/configmaps/c",
                         watch=None, timeoutSeconds=0.3)
    assert [e["object"]["metadata"]["name"] for e in await w.rest()] == ["c"]


async def test_watch_param_on_object_path_is_a_get(apiserver: ApiServer, req) -> None:
    apiserver.create_object(cm("a"))
    status, body, _ = await req("GET", f"{CMS}/a", params={"watch": "1"})
    assert status == 200 and body["kind"] == "ConfigMap"


async def test_too_old_rv_is_200_then_error_410(apiserver: ApiServer,
                                                session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    apiserver.compact()
    apiserver.create_object(cm("b"))
    w = await open_watch(session, apiserver, CMS, resourceVersion=1)
    assert w.status == 200
    events = await w.rest()
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    st = events[0]["object"]
    assert st["code"] == 410 and st["reason"] == "Expired"
    assert st["message"] == f"too old resource version: 1 ({apiserver.store.history_start})"


async def test_bad_rv_is_500(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, params={"watch": "1", "resourceVersion": "abc"})
    assert status == 500 and "reason" not in body
    assert body["message"].startswith('resourceVersion: Invalid value: "abc"')


async def test_history_bounded_by_count_and_age() -> None:
    now = [0.0]
    srv = ApiServer(history_size=3, history_age=10, clock=lambda: now[0])
    async with srv, aiohttp.ClientSession() as s:
        for i in range(5):
            srv.create_object(cm(f"c{i}"))
        assert srv.store.history_start == srv.store.rv - 3
        w = await open_watch(s, srv, CMS, resourceVersion=srv.store.rv - 4)
        assert (await w.next())["type"] == "ERROR"  # type: ignore[index]
        w = await open_watch(s, srv, CMS, resourceVersion=srv.store.rv - 3, timeoutSeconds=0.3)
        assert len(await w.rest()) == 3
        now[0] = 11.0
        w = await open_watch(s, srv, CMS, resourceVersion=srv.store.rv - 1)
        assert (await w.next())["type"] == "ERROR"  # type: ignore[index]


async def test_timeout_ends_stream_cleanly(apiserver: ApiServer,
                                           session: aiohttp.ClientSession) -> None:
    t0 = time.monotonic()
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv,
                         timeoutSeconds=0.3)
    assert await w.rest() == []
    assert 0.25 < time.monotonic() - t0 < 2


async def test_bookmarks_periodic_and_before_deadline(apiserver: ApiServer,
                                                      session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    rv = apiserver.store.rv
    w = await open_watch(session, apiserver, CMS, resourceVersion=rv, allowWatchBookmarks=True,
                         timeoutSeconds=0.7)
    events = await w.rest()
    assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
    assert events[0]["object"] == {"kind": "ConfigMap", "apiVersion": "v1",
                                   "metadata": {"resourceVersion": str(rv),
                                                "creationTimestamp": None}}
    # no bookmarks unless asked for
    w = await open_watch(session, apiserver, CMS, resourceVersion=rv, timeoutSeconds=0.4)
    assert await w.rest() == []


async def test_bookmark_rv_never_runs_ahead_of_sent_events(
        apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv,
                         allowWatchBookmarks=True, timeoutSeconds=0.5)
    for i in range(3):
        apiserver.create_object(cm(f"x{i}"))
    other = apiserver.create_object({"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": "s", "namespace": "default"}})
    events = await w.rest()
    assert [e["type"] for e in events[:3]] == ["ADDED"] * 3
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[0]["object"]["metadata"]["resourceVersion"] == (
        other["metadata"]["resourceVersion"])


async def test_watchlist_streaming(apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    apiserver.create_object(cm("a"))
    rv = apiserver.store.rv
    w = await open_watch(session, apiserver, CMS, sendInitialEvents=True,
                         resourceVersionMatch="NotOlderThan", allowWatchBookmarks=True,
                         timeoutSeconds=0.3)
    events = await w.rest()
    assert events[0]["type"] == "ADDED"
    end = events[1]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"] == {"resourceVersion": str(rv), "creationTimestamp": None,
                                         "annotations": {"k8s.io/initial-events-end": "true"}}
    # defaulted for RV=0 watches with the gate on (file 071)
    w = await open_watch(session, apiserver, CMS, resourceVersion="0", allowWatchBookmarks=True,
                         timeoutSeconds=0.3)
    events = await w.rest()
    assert events[1]["object"]["metadata"].get("annotations") == {
        "k8s.io/initial-events-end": "true"}
    # without bookmarks: initial events, no end marker (file 067)
    w = await open_watch(session, apiserver, CMS, sendInitialEvents=True,
                         resourceVersionMatch="NotOlderThan", timeoutSeconds=0.3)
    assert [e["type"] for e in await w.rest()] == ["ADDED"]
    # sendInitialEvents=false: nothing initial (file 069)
    w = await open_watch(session, apiserver, CMS, sendInitialEvents=False,
                         resourceVersionMatch="NotOlderThan", resourceVersion=rv,
                         timeoutSeconds=0.3)
    assert await w.rest() == []


async def test_watchlist_validation_and_gate_off(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, params={"watch": "1", "sendInitialEvents": "true"})
    assert status == 422 and body["message"].endswith(
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
    async with ApiServer(watch_list=False) as srv, aiohttp.ClientSession() as s:
        w = await open_watch(s, srv, CMS, sendInitialEvents=True,
                             resourceVersionMatch="NotOlderThan")
        body = await w.resp.json()
        assert w.status == 422 and body["message"].endswith(
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is "
            "enabled")
        srv.create_object(cm("a"))
        w = await open_watch(s, srv, CMS, resourceVersion="0", allowWatchBookmarks=True,
                             timeoutSeconds=0.2)
        events = await w.rest()
        assert events[0]["type"] == "ADDED"
        assert all("annotations" not in e["object"]["metadata"] for e in events[1:])


async def test_label_selector_transitions(apiserver: ApiServer,
                                          session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv,
                         labelSelector="a=1", timeoutSeconds=2)
    obj = apiserver.create_object(cm("sel", labels={"a": "1"}))
    obj["metadata"]["labels"] = {"a": "2"}
    obj = apiserver.update_object(obj)
    obj["metadata"]["labels"] = {"a": "1"}
    obj = apiserver.update_object(obj)
    apiserver.delete_object("v1", "ConfigMap", "sel")
    seen = [(await w.next()) for _ in range(4)]
    assert [e["type"] for e in seen] == ["ADDED", "DELETED", "ADDED", "DELETED"]  # type: ignore[index]
    left = seen[1]["object"]  # type: ignore[index]
    assert left["metadata"]["labels"] == {"a": "1"}  # the old object, new RV (like the cache)
    w.close()


async def test_field_selector_watch_and_all_namespaces(apiserver: ApiServer,
                                                       session: aiohttp.ClientSession) -> None:
    apiserver.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "o"}})
    w = await open_watch(session, apiserver, "/api/v1/configmaps",
                         resourceVersion=apiserver.store.rv, fieldSelector="metadata.name=one",
                         timeoutSeconds=2)
    apiserver.create_object(cm("two", ns="o"))
    apiserver.create_object(cm("one", ns="o"))
    ev = await w.next()
    assert ev is not None and ev["object"]["metadata"]["namespace"] == "o"
    assert ev["object"]["metadata"]["name"] == "one"
    w.close()


async def test_watch_future_rv_504(apiserver: ApiServer, req) -> None:
    status, _, headers = await req("GET", CMS, params={"watch": "1", "resourceVersion": "999"})
    assert status == 504 and headers["Retry-After"] == "1"


async def test_future_rv_reached_while_waiting(apiserver: ApiServer,
                                               session: aiohttp.ClientSession) -> None:
    target = apiserver.store.rv + 1
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, apiserver.create_object, cm("late"))
    w = await open_watch(session, apiserver, CMS, resourceVersion=target, timeoutSeconds=0.3)
    assert w.status == 200
    assert await w.rest() == []


async def test_stop_all_watches_ends_cleanly(apiserver: ApiServer,
                                             session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv)
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 1
    apiserver.stop_all_watches()
    assert await w.rest() == []
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 0


async def test_client_disconnect_frees_the_watch(apiserver: ApiServer,
                                                 session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, resourceVersion=apiserver.store.rv)
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 1
    w.close()
    for _ in range(40):
        await asyncio.sleep(0.05)
        if apiserver.open_watches == 0:
            break
    assert apiserver.open_watches == 0
    assert not apiserver.store._subs


async def test_stop_and_reset_watches_by_path_prefix(apiserver: ApiServer,
                                                     session: aiohttp.ClientSession) -> None:
    rv = apiserver.store.rv
    cms = await open_watch(session, apiserver, CMS, resourceVersion=rv)
    all_cms = await open_watch(session, apiserver, "/api/v1/configmaps", resourceVersion=rv)
    secrets = await open_watch(session, apiserver, "/api/v1/namespaces/default/secrets",
                               resourceVersion=rv)
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 3
    apiserver.stop_all_watches(path_prefix=CMS)
    assert await cms.rest() == []  # ended cleanly
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 2
    apiserver.reset_watches(path_prefix="/api/v1/configmaps")
    with pytest.raises(aiohttp.ClientPayloadError):
        await all_cms.rest()
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 1
    apiserver.create_object({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "s", "namespace": "default"}})
    ev = await secrets.next()  # the other watch still streams
    assert ev is not None and ev["type"] == "ADDED"
    apiserver.reset_watches(path_prefix="/apis/")  # matches nothing
    apiserver.stop_all_watches(path_prefix="/api/v1/namespaces/other/")
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 1
    secrets.close()


async def test_admin_endpoint_stops_watches_by_path_prefix(
        apiserver: ApiServer, session: aiohttp.ClientSession) -> None:
    rv = apiserver.store.rv
    cms = await open_watch(session, apiserver, CMS, resourceVersion=rv)
    secrets = await open_watch(session, apiserver, "/api/v1/namespaces/default/secrets",
                               resourceVersion=rv)
    await asyncio.sleep(0.05)
    async with session.post(f"{apiserver.url}/_sim/stop-watches",
                            params={"path_prefix": CMS}) as resp:
        assert resp.status == 200
    assert await cms.rest() == []
    await asyncio.sleep(0.05)
    assert apiserver.open_watches == 1
    async with session.post(f"{apiserver.url}/_sim/reset-watches") as resp:
        assert resp.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await secrets.rest()
