"""A lazy watcher's LIST feeds the Store the items' JSON bytes (issue 25, third round): no
dict is built for an object the Store ingests, and what it keeps is what the eager path
keeps (managedFields cut out of the bytes exactly, hostile bytes included)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.client.objects import KeyFields, ListShape, lazy_list
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SHAPE = ListShape("ConfigMapList", "v1")
_decode = msgspec.json.Decoder(dict[str, Any]).decode


def stored(store: wk.Store, name: str) -> dict[str, Any]:
    """The object as the store keeps it (its blob decoded), not a fresh dict it holds."""
    entry = store._objects[wk.meta.ObjectRef("default", name)]
    got: dict[str, Any] = _decode(store._codec.decode(entry.blob))
    return got


async def collect(api: wk.Api, cfg: wk.WatchConfig) -> list[wk.Event]:
    """A watcher's events up to its first InitDone."""
    events: list[wk.Event] = []
    run = aiter(wk.watcher(api, cfg))
    try:
        async for ev in run:
            events.append(ev)
            if isinstance(ev, wk.InitDone):
                return events
    finally:
        await run.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the watch ended before InitDone")


HOSTILE = '"a\\",\\"managedFields\\":[] <tag> & \\u00e9"'  # a key's text inside a string


async def test_a_lazily_listed_object_is_stored_without_building_its_dict(
    apiserver: ApiServer,
) -> None:
    async with apiserver.client() as client:
        api = client.api("configmaps", namespace="default")
        for i in range(7):
            await api.create({"metadata": {"name": f"cm-{i}", "labels": {"app": "x"}},
                              "data": {"k": str(i), "hostile": json.loads(HOSTILE)}},
                             field_manager="tester")
        assert (await api.get("cm-0"))["metadata"]["managedFields"]  # there to be cut
        base = wk.WatchConfig(max_unhealthy=None, page_size=3)  # three pages
        lazy_events = await collect(api, wk.WatchConfig(
            max_unhealthy=None, page_size=3, lazy_decode=True))
        eager_events = await collect(api, base)

    lazy, lazy_writer = wk.Store.new()
    eager, eager_writer = wk.Store.new()
    for ev in lazy_events:
        lazy_writer.apply(ev)
    for ev in eager_events:
        eager_writer.apply(ev)
    applied = [ev for ev in lazy_events if isinstance(ev, wk.InitApply)]
    assert len(applied) == 7
    # Stored, and still no dict built: the Store took the item's bytes.
    assert not any(ev.decoded for ev in applied)
    assert sorted(lazy.keys()) == sorted(eager.keys())
    for i in range(7):
        name = f"cm-{i}"
        assert stored(lazy, name) == stored(eager, name)
        assert "managedFields" not in stored(lazy, name)["metadata"]
        assert stored(lazy, name)["data"]["hostile"] == json.loads(HOSTILE)
        assert lazy.head(name, namespace="default") == eager.head(name, namespace="default")
        assert lazy.resource_version(name, namespace="default") == \
            eager.resource_version(name, namespace="default")
    # The event's object, read now, is what the eager path hands out after the store saw it
    # (the eager store popped managedFields from the very dict the event carries).
    assert [ev.obj for ev in applied] == [ev.obj for ev in eager_events
                                          if isinstance(ev, wk.InitApply)]
    assert all(ev.decoded for ev in applied)
    # A fresh read of the store is that same dict, read once; then decoded from the blob.
    got = lazy.get("cm-6", namespace="default")
    assert got is applied[-1].obj
    assert lazy.get("cm-6", namespace="default") == eager.get("cm-6", namespace="default")


def page(*items: str) -> bytes:
    return ('{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},'
            '"items":[' + ",".join(items) + "]}").encode()


MF = '[{"manager":"m","operation":"Update","fieldsV1":{"f:data":{}}}]'
CASES = {
    # managedFields the last key of metadata, and a key's text inside a string value
    "last": '{"metadata":{"name":"a","namespace":"default","resourceVersion":"5",'
            '"managedFields":' + MF + '},"data":{"s":' + HOSTILE + '}}',
    # the first key of metadata: its comma follows it
    "first": '{"metadata":{"managedFields":' + MF + ',"name":"a","namespace":"default",'
             '"resourceVersion":"5","labels":{"x":"y"}},"data":{"k":"v"}}',
    # a CR with a managedFields field of its own in spec, the same bytes as metadata's
    "spec": '{"spec":{"managedFields":' + MF + '},"metadata":{"name":"a","namespace":'
            '"default","resourceVersion":"5","managedFields":' + MF + '}}',
    # metadata's key spelled with an escape; spec's, plain, holds the same bytes
    "escaped": '{"spec":{"managedFields":' + MF + '},"metadata":{"name":"a","namespace":'
               '"default","resourceVersion":"5","managedField\\u0073":' + MF + '}}',
    # a key whose text ends in "managedFields" (an escaped quote before it)
    "inkey": '{"metadata":{"name":"a","namespace":"default","resourceVersion":"5",'
             '"labels":{"x\\"managedFields":"1"},"managedFields":' + MF + '}}',
    # a backslash but no \u escape: the cut needs no second look
    "newline": '{"metadata":{"name":"a","namespace":"default","managedFields":' + MF + '},'
               '"data":{"f":"line\\nline \\"q\\""}}',
    # managedFields null; and none at all
    "null": '{"metadata":{"name":"a","namespace":"default","managedFields":null}}',
    "none": '{"metadata":{"name":"a","namespace":"default"},"spec":{"managedFields":1}}',
    # the same key twice in metadata (the last one counts, as in a dict)
    "twice": '{"metadata":{"name":"a","namespace":"default","managedFields":[1],'
             '"managedFields":' + MF + '}}',
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("managed_fields", "strip"), [(False, False), (True, False),
                                                        (True, True)])
def test_hostile_bytes_are_stored_as_the_eager_path_stores_them(
    name: str, managed_fields: bool, strip: bool,
) -> None:
    """``strip``: the watcher's strip_managed_fields, which wins over a store that keeps
    them (the eager watcher strips the dict before the store sees it)."""
    listed = lazy_list(page(CASES[name]), "/api/v1/configmaps", SHAPE)
    assert listed is not None and len(listed.items) == 1
    item = listed.items[0]
    event = wk.InitApply(None, item.key, item, strip)
    obj = _decode(CASES[name].encode())
    lazy, lazy_writer = wk.Store.new(managed_fields=managed_fields)
    eager, eager_writer = wk.Store.new(managed_fields=managed_fields)
    lazy_writer.apply(event)
    if strip:
        obj["metadata"].pop("managedFields", None)
    eager_event = wk.InitApply(copy.deepcopy(obj))
    eager_writer.apply(eager_event)
    for writer in (lazy_writer, eager_writer):
        writer.apply(wk.InitDone())
    assert stored(lazy, "a") == stored(eager, "a")
    assert lazy.head("a", namespace="default") == eager.head("a", namespace="default")
    assert event.obj == eager_event.obj
    want = copy.deepcopy(obj)
    if not managed_fields or strip:
        want["metadata"].pop("managedFields", None)
    assert stored(lazy, "a") == want
    assert lazy.get("a", namespace="default") == want


@pytest.mark.parametrize(("name", "cut"), [
    ("last", True), ("first", True), ("newline", True), ("null", True),
    ("inkey", False), ("spec", False), ("escaped", False), ("twice", False),
])
def test_only_a_cut_known_exact_is_made_from_the_bytes(name: str, cut: bool) -> None:
    """The cut is made in the bytes when it is sure; otherwise the object is decoded (the
    previous test shows both store the same)."""
    listed = lazy_list(page(CASES[name]), "/api/v1/configmaps", SHAPE)
    assert listed is not None
    event = wk.InitApply(None, listed.items[0].key, listed.items[0])
    _, writer = wk.Store.new()
    writer.apply(event)
    assert event.decoded is not cut


def test_a_store_with_an_index_decodes_and_indexes() -> None:
    listed = lazy_list(page(CASES["first"]), "/api/v1/configmaps", SHAPE)
    assert listed is not None
    event = wk.InitApply(None, listed.items[0].key, listed.items[0])
    store, writer = wk.Store.new()
    store.index_by("x", lambda o: [o["metadata"]["labels"]["x"]])
    writer.apply(event)
    writer.apply(wk.InitDone())
    assert event.decoded
    assert [o["metadata"]["name"] for o in store.by_index("x", "y")] == ["a"]


def test_a_lazy_watch_line_is_stored_from_its_object_bytes() -> None:
    """A live event whose line is at hand (``RawEvent.of(line=...)``'s form)."""
    line = ('{"type":"ADDED","object":' + CASES["first"] + "}").encode()
    key = KeyFields("default", "a", "5")
    event = wk.Apply(None, key, line)
    store, writer = wk.Store.new()
    writer.apply(event)
    assert not event.decoded
    want = _decode(CASES["first"].encode())
    want["metadata"].pop("managedFields")
    assert stored(store, "a") == want
    assert store.get("a", namespace="default") == want


@pytest.mark.parametrize("body", [
    b'{"kind":"PodList","apiVersion":"v1","items":[]}',  # another kind
    b'{"kind":"ConfigMapList","apiVersion":"v2","items":[]}',  # another version
    b'{"kind":"ConfigMapList","apiVersion":"v1"}',  # no items
    b'{"kind":"ConfigMapList","items":[{"metadata":{"name":""}}]}',  # a nameless item
    b'{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","namespace":null}}]}',
    b'{"kind":"ConfigMapList","items":[{"metadata":[]}]}',
    b'{"kind":"ConfigMapList","items":{}}',
    b'{"kind":"ConfigMapList","items":[], "metadata":{"remainingItemCount":true}}',
])
def test_a_page_the_lazy_decoder_refuses_goes_to_the_eager_checks(body: bytes) -> None:
    assert lazy_list(body, "/api/v1/configmaps", SHAPE) is None
