"""The watcher's per-piece bookkeeping (issue 11) together with issue 10's rules.

A piece is whatever whole lines were in the receive buffer: a streaming list's
initial-events-end bookmark may share one with the window's live events before it and the
live events after it; a raw 127.0.0.1 server sends them in one chunk so they land in one
piece. The health rules of main (``established`` vs ``progressed``) must hold on the fast
path, where the bookkeeping runs once per piece."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.watcher import INITIAL_EVENTS_END
from watchkeeper_sim import ApiServer

from .test_stream import HEAD, chunked, raw_server, respond_with

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def line(kind: str, name: str, rv: int, **more: Any) -> bytes:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": str(rv), **more}
    return msgspec.json.encode({"type": kind, "object": {
        "kind": "ConfigMap", "apiVersion": "v1", "metadata": meta, "data": {"v": str(rv)}}}) + b"\n"


def end_bookmark(rv: int) -> bytes:
    return msgspec.json.encode({"type": "BOOKMARK", "object": {
        "kind": "ConfigMap", "apiVersion": "v1", "metadata": {
            "resourceVersion": str(rv), "annotations": {INITIAL_EVENTS_END: "true"}}}}) + b"\n"


# The initial window (a, b; b created and deleted, a modified), the end bookmark at 20, then
# live events in the same piece.
WINDOW = (line("ADDED", "a", 10) + line("ADDED", "b", 11) + line("DELETED", "b", 12)
          + line("MODIFIED", "a", 13) + end_bookmark(20))
LIVE = line("MODIFIED", "a", 21) + line("ADDED", "c", 22) + line("DELETED", "a", 23)


def shape(ev: wk.Event) -> tuple[str, ...]:
    if isinstance(ev, wk.InitApply | wk.Apply | wk.Delete):
        return (type(ev).__name__, ev.name, ev.resource_version, ev.obj["data"]["v"])
    return (type(ev).__name__,)


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_live_events_after_the_end_bookmark_in_the_same_piece(lazy: bool) -> None:
    """The window's survivors, InitDone, then the piece's remaining events as watch events."""
    data = HEAD + chunked(WINDOW + LIVE, [])
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        w = wk.watcher(api, wk.WatchConfig(initial_list="streaming", lazy_decode=lazy))
        events = aiter(w)
        got = []
        async with asyncio.timeout(10):
            async for ev in events:
                got.append(shape(ev))
                if len(got) == 6:
                    break
        await events.aclose()  # type: ignore[attr-defined]
    assert got == [
        ("InitStart",),
        ("InitApply", "a", "13", "13"),
        ("InitDone",),
        ("Apply", "a", "21", "21"),
        ("Apply", "c", "22", "22"),
        ("Delete", "a", "23", "23"),
    ]
    assert w.resource_version == "23"
    assert w.health.events == {"ADDED": 3, "MODIFIED": 2, "DELETED": 2, "BOOKMARK": 1}


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_a_consumer_that_stops_at_init_done_resumes_from_the_bookmark(lazy: bool) -> None:
    """The live events after the bookmark were never handed out: not resumed past them."""
    data = HEAD + chunked(WINDOW + LIVE, [])
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        w = wk.watcher(api, wk.WatchConfig(initial_list="streaming", lazy_decode=lazy))
        events = aiter(w)
        async with asyncio.timeout(10):
            async for ev in events:
                if isinstance(ev, wk.InitDone):
                    break
        await events.aclose()  # type: ignore[attr-defined]
    assert w.resource_version == "20"


async def test_an_error_after_the_end_bookmark_in_the_same_piece() -> None:
    """Events before an ERROR line are delivered, then the error is retried (410: relist)."""
    gone = msgspec.json.encode({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
        "reason": "Expired", "message": "too old resource version"}}) + b"\n"
    data = HEAD + chunked(WINDOW + line("ADDED", "c", 22) + gone, [])
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        w = wk.watcher(api, wk.WatchConfig(initial_list="streaming", max_unhealthy=None))
        events = aiter(w)
        got = []
        async with asyncio.timeout(10):
            async for ev in events:
                got.append(shape(ev) if not isinstance(ev, wk.WatchError)
                           else ("WatchError", type(ev.error).__name__))
                if len(got) == 5:
                    break
        await events.aclose()  # type: ignore[attr-defined]
    assert got == [("InitStart",), ("InitApply", "a", "13", "13"), ("InitDone",),
                   ("Apply", "c", "22", "22"), ("WatchError", "Gone")]


class CountingBackoff:
    """A constant backoff that counts its resets (the sign of real progress)."""

    def __init__(self) -> None:
        self.resets = 0

    def next(self) -> float | None:
        return 0.01

    def reset(self) -> None:
        self.resets += 1


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_a_plain_piece_after_a_failure_is_progress_even_once_established(
    lazy: bool,
) -> None:
    """After a failure, a list then an accepted watch make health HEALTHY (``established``)
    but do not reset the backoff; the first piece of events does (``progressed``), though
    health is already HEALTHY with no failures counted: the fast path must look at
    ``settled``, not only at the state."""
    state = {"lists": 0}
    listing = msgspec.json.encode({"kind": "ConfigMapList", "apiVersion": "v1",
                                   "metadata": {"resourceVersion": "5"}, "items": []})

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode()
        if "watch=" not in request.split("\r\n", 1)[0]:
            state["lists"] += 1
            if state["lists"] == 1:  # the first list fails once
                body = b'{"kind":"Status","code":503,"reason":"ServiceUnavailable"}'
                writer.write(b"HTTP/1.1 503 X\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(listing), listing))
            await writer.drain()
            writer.close()
            return
        writer.write(HEAD + chunked(line("ADDED", "x", 6) + line("ADDED", "y", 7), []))
        await writer.drain()
        await asyncio.sleep(3600)

    async with raw_server(handler) as client:
        api = client.api("configmaps", namespace="ns")
        backoff = CountingBackoff()
        w = wk.watcher(api, wk.WatchConfig(lazy_decode=lazy, max_unhealthy=None),
                       backoff=backoff)
        events = aiter(w)
        got: list[str] = []
        async with asyncio.timeout(10):
            async for ev in events:
                got.append(type(ev).__name__)
                if isinstance(ev, wk.InitDone):
                    assert backoff.resets == 0
                if isinstance(ev, wk.Apply):
                    break
        await events.aclose()  # type: ignore[attr-defined]
    assert got == ["InitStart", "WatchError", "InitStart", "InitDone", "Apply"]
    assert w.health.state is wk.WatchState.HEALTHY
    assert backoff.resets == 1


# -- the paginated list's InitDone and the watcher's health --------------------------------------


async def test_init_done_of_a_list_comes_once_the_watch_is_accepted_so_health_agrees() -> None:
    """A cache is ready (InitDone) no sooner than its watcher is healthy: the last page and
    InitDone are handed out once the watch after the list is accepted, with nothing awaited
    between them. (Before: InitDone, then the watch opened on a new connection while
    /readyz said 503 for the store-ready, watcher-starting moment.)"""
    async with ApiServer() as srv, srv.client() as client:
        for name in ("a", "b", "c"):
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name, "namespace": "default"}})
        w = wk.watcher(client.api("configmaps", namespace="default"), wk.WatchConfig(page_size=2))
        events = aiter(w)
        got: list[tuple[str, str, wk.WatchState, int]] = []
        async with asyncio.timeout(10):
            async for ev in events:
                name = ev.name if isinstance(ev, wk.InitApply) else ""
                got.append((type(ev).__name__, name, w.health.state, srv.open_watches))
                if isinstance(ev, wk.InitDone):
                    break
        await events.aclose()  # type: ignore[attr-defined]
    starting, healthy = wk.WatchState.STARTING, wk.WatchState.HEALTHY
    assert got == [("InitStart", "", starting, 0), ("InitApply", "a", starting, 0),
                   ("InitApply", "b", starting, 0), ("InitApply", "c", healthy, 1),
                   ("InitDone", "", healthy, 1)]


async def test_init_done_of_a_list_still_comes_when_the_watch_is_refused() -> None:
    """List allowed, watch forbidden: the cache still gets the whole list (InitDone) before
    the error, and the watcher is not healthy."""
    async with ApiServer() as srv:
        srv.add_user("lister")
        srv.rbac.grant("lister", verbs=["list"], resources=["configmaps"])
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "namespace": "default"}})
        async with srv.client("lister") as client:
            w = wk.watcher(client.api("configmaps", namespace="default"),
                           wk.WatchConfig(max_unhealthy=None))
            events = aiter(w)
            got: list[str] = []
            async with asyncio.timeout(10):
                async for ev in events:
                    got.append(type(ev).__name__)
                    if isinstance(ev, wk.WatchError):
                        assert isinstance(ev.error, wk.Forbidden)
                        break
            await events.aclose()  # type: ignore[attr-defined]
    assert got == ["InitStart", "InitApply", "InitDone", "WatchError"]
    assert w.health.state is wk.WatchState.DEGRADED


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_the_stream_interprets_bookmarks_and_error_lines_itself(lazy: bool) -> None:
    """The client stream hands out typed items (issue 12 item 5): object events of the
    caller's classes, ``Bookmark`` (with its version and the initial-events-end mark) and
    an ERROR line raised as its typed error after the events before it, in one piece; the
    counts and the resume version are kept by the stream per piece."""
    from watchkeeper.client.objects import Bookmark, ObjectEvent

    gone = msgspec.json.encode({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
        "reason": "Expired", "message": "too old resource version"}}) + b"\n"
    data = HEAD + chunked(WINDOW + line("ADDED", "c", 22) + gone + line("ADDED", "d", 30), [])
    counts: dict[str, int] = {}
    got: list[Any] = []
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        async with api.watch(lazy=lazy) as stream:
            with pytest.raises(wk.Gone) as info:
                async for batch in stream.batches(
                    {"ADDED": wk.Apply, "MODIFIED": wk.Apply, "DELETED": wk.Delete},
                    lambda kind: wk.Apply, counts=counts,
                ):
                    got.extend(batch)
            assert stream.resource_version == "22", "not past the ERROR line"
    assert info.value.code == 410 and info.value.reason == "Expired"
    assert [type(ev).__name__ for ev in got] == [
        "Apply", "Apply", "Delete", "Apply", "Bookmark", "Apply"]
    assert all(isinstance(ev, ObjectEvent) for ev in got)
    mark = got[4]
    assert isinstance(mark, Bookmark) and mark.initial_events_end
    assert mark.resource_version == "20" and mark.type == "BOOKMARK"
    assert [ev.resource_version for ev in got] == ["10", "11", "12", "13", "20", "22"]
    assert got[5].obj["data"] == {"v": "22"} and got[5].name == "c"
    assert counts == {"ADDED": 3, "MODIFIED": 1, "DELETED": 1, "BOOKMARK": 1}


async def test_api_watch_raises_an_error_line_as_its_typed_error() -> None:
    """``Api.watch`` yields ``RawEvent``s (a bookmark too) and raises an ERROR line typed."""
    gone = msgspec.json.encode({"type": "ERROR", "object": {
        "kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}) + b"\n"
    data = HEAD + chunked(line("ADDED", "a", 10) + end_bookmark(20) + gone, [])
    seen: list[Any] = []
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        with pytest.raises(wk.Gone):
            async with api.watch() as stream:
                async for ev in stream:
                    seen.append(ev)
    assert [(ev.type, ev.resource_version) for ev in seen] == [("ADDED", "10"), ("BOOKMARK", "20")]
    assert all(isinstance(ev, wk.client.RawEvent) for ev in seen)
    assert seen[1].object["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}


async def test_api_watch_passes_an_unknown_event_type_on_without_growing_a_table() -> None:
    """A type the apiserver never sends comes out as a ``RawEvent`` of that type; a server
    that sends ever new ones does not grow the client's table of event classes."""
    from watchkeeper.client import objects

    kinds = [f"ODD{i}" for i in range(40)]
    data = HEAD + chunked(b"".join(line(kind, "a", 10 + i) for i, kind in enumerate(kinds)), [])
    seen: list[Any] = []
    async with raw_server(respond_with(data)) as client, \
            client.api("configmaps", namespace="ns").watch() as stream:
        async for ev in stream:
            seen.append(ev)
    assert [ev.type for ev in seen] == kinds
    assert all(isinstance(ev, wk.client.RawEvent) and ev.name == "a" for ev in seen)
    assert len(objects._RAW_CLASSES) <= objects._MAX_RAW_CLASSES


@pytest.mark.parametrize("body", [
    LIVE,  # three types in one piece
    line("MODIFIED", "a", 21) + line("MODIFIED", "c", 22) + line("MODIFIED", "d", 23),  # one
], ids=["mixed", "one-type"])
async def test_a_lazy_plain_piece_keeps_each_event_its_class_line_and_counts(body: bytes) -> None:
    """A lazy piece of ADDED/MODIFIED/DELETED is typed by C calls only (issue 25 item 4:
    no Python per event): each event is of its type's class, decodes its own line, and the
    counts and resume version are the piece's."""
    data = HEAD + chunked(body, [])
    lines = [msgspec.json.decode(x) for x in body.splitlines()]
    counts: dict[str, int] = {}
    got: list[Any] = []
    classes = {"ADDED": wk.Apply, "MODIFIED": wk.Apply, "DELETED": wk.Delete}
    async with raw_server(respond_with(data, close=False)) as client, \
            client.api("configmaps", namespace="ns").watch(lazy=True) as stream:
        async for batch in stream.batches(classes, lambda kind: wk.Apply, counts=counts):
            got.extend(batch)
            if len(got) == len(lines):
                break
        assert stream.resource_version == lines[-1]["object"]["metadata"]["resourceVersion"]
    assert [type(ev) for ev in got] == [classes[x["type"]] for x in lines]
    assert [ev.obj for ev in got] == [x["object"] for x in lines]
    assert [ev.name for ev in got] == [x["object"]["metadata"]["name"] for x in lines]
    expected: dict[str, int] = {}
    for x in lines:
        expected[x["type"]] = expected.get(x["type"], 0) + 1
    assert counts == expected
