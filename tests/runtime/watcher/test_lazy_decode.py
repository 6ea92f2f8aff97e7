"""WatchConfig(lazy_decode=True): objects are decoded on first read, yet every line is
validated as it arrives, so a bad line is still an InvalidResponse of the stream (and a
resume), never an exception from ``event.obj`` later."""

from __future__ import annotations

import asyncio

import pytest

import watchkeeper as wk
from watchkeeper.client import RawEvent
from watchkeeper_sim import ApiServer

from .conftest import configmap, record

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

LAZY = wk.WatchConfig(max_unhealthy=None, lazy_decode=True)


def cm_api(client: wk.Client) -> wk.Api:
    return client.api("configmaps", namespace="default")


async def test_lazy_events_equal_eager_ones_and_decode_only_when_read(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    await api.create(configmap("before", k="0"))
    lazy = record(api, LAZY)
    eager = record(api, wk.WatchConfig(max_unhealthy=None))
    for rec in (lazy, eager):
        await rec.wait_for(lambda r: r.of(wk.InitDone))
    await api.create(configmap("a", k="1"))
    await api.patch("a", {"data": {"k": "2"}})
    await api.delete("a")
    for rec in (lazy, eager):
        await rec.wait_for(lambda r: r.of(wk.Delete))
    await lazy.stop()
    await eager.stop()

    changes = lazy.of(wk.Apply, wk.Delete)
    assert [type(ev) for ev in changes] == [wk.Apply, wk.Apply, wk.Delete]
    # Keys are known without decoding the object ...
    assert [(ev.namespace, ev.name) for ev in changes] == [("default", "a")] * 3
    assert all("not decoded" in repr(ev) for ev in changes)
    rvs = [ev.resource_version for ev in changes]
    assert rvs == sorted(rvs, key=int) and len(set(rvs)) == 3
    # ... and reading obj gives exactly what the eager watcher delivered.
    assert changes == eager.of(wk.Apply, wk.Delete)
    assert [ev.obj["data"]["k"] for ev in changes] == ["1", "2", "2"]
    assert all(wk.meta.resource_version(ev.obj) == ev.resource_version for ev in changes)
    assert "not decoded" not in repr(changes[0])
    match changes[1]:
        case wk.Apply(obj):
            assert obj["data"] == {"k": "2"}
        case _:
            pytest.fail("an Apply must match case wk.Apply(obj)")


async def test_lazy_strip_managed_fields_applies_on_first_read(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    rec = record(api, wk.WatchConfig(lazy_decode=True, strip_managed_fields=True))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await api.create(configmap("m", k="1"), field_manager="tester")
    await rec.wait_for(lambda r: r.of(wk.Apply))
    await rec.stop()
    (ev,) = rec.of(wk.Apply)
    assert "managedFields" not in ev.obj["metadata"]
    assert ev.obj["data"] == {"k": "1"}
    # The server did record the manager: the watcher removed it, not the server.
    stored = srv.get_object("v1", "ConfigMap", "m")
    assert stored["metadata"]["managedFields"][0]["manager"] == "tester"


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"this is not json\n", id="not-json"),
        pytest.param(b'{"type":"ADDED","object":5}\n', id="object-not-a-map"),
        pytest.param(b'{"type":"ADDED","object":{"metadata":{"name":"x"},"data":{"k":"\xff"}}}\n',
                     id="invalid-utf8"),
        pytest.param(b'{"object":{"metadata":{"name":"x"}}}\n', id="no-type"),
    ],
)
async def test_lazy_stream_rejects_a_bad_line_on_arrival_and_resumes(
    srv: ApiServer, client: wk.Client, line: bytes
) -> None:
    api = cm_api(client)
    rec = record(api, LAZY, backoff=wk.ConstantBackoff(0.05))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    srv.faults.garbage(line, count=1, watch=True)
    await api.create(configmap("g1"))
    await api.create(configmap("g2"))
    await rec.wait_for(lambda r: {"g1", "g2"} <= set(r.state()))
    await rec.stop()
    invalid = [e for e in rec.errors() if isinstance(e, wk.InvalidResponse)]
    assert invalid, rec.errors()
    assert "undecodable watch event" in str(invalid[0])
    assert srv.count(is_list=True) == 1  # resumed from the last good version, no relist
    # Every delivered event decodes: the bad line never reached the consumer.
    assert all(ev.obj["metadata"]["name"] in {"g1", "g2"} for ev in rec.of(wk.Apply))


async def test_lazy_watcher_feeds_a_store(srv: ApiServer, client: wk.Client) -> None:
    api = cm_api(client)
    for i in range(3):
        await api.create(configmap(f"s{i}", k=str(i)))
    store, writer = wk.Store.new()
    rec = record(api, LAZY)  # a second, independent lazy watcher keeps running meanwhile

    async def feed() -> None:
        async for _ in wk.reflector(writer, wk.watcher(api, LAZY)):
            pass

    task = asyncio.create_task(feed())
    await store.wait_until_ready(timeout=10)
    await api.patch("s1", {"data": {"k": "changed"}})
    await api.delete("s2")
    async with asyncio.timeout(10):
        while (store.get("s1", namespace="default") or {}).get("data") != {"k": "changed"} \
                or store.get("s2", namespace="default") is not None:
            await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await rec.stop()
    assert sorted(wk.meta.name(o) for o in store) == ["s0", "s1"]


def test_raw_event_needs_an_object_or_a_line() -> None:
    """One lazy event class (client/objects.py ``ObjectEvent``): ``RawEvent`` and the
    watcher's events are its subclasses; one with neither object nor line cannot decode."""
    event = wk.client.objects.raw_event_class("ADDED")(None)
    assert isinstance(event, RawEvent) and event.type == "ADDED"
    assert issubclass(wk.Apply, wk.client.objects.ObjectEvent)
    assert issubclass(RawEvent, wk.client.objects.ObjectEvent)
    with pytest.raises(TypeError, match="has no object"):
        event.object  # noqa: B018
    with pytest.raises(ValueError, match="needs an object or the line"):
        RawEvent.of("ADDED")
    made = RawEvent.of("MODIFIED", {"metadata": {"name": "x"}})
    assert made.type == "MODIFIED" and made.name == "x" and made.decoded


async def test_lazy_streaming_list_and_a_410_relist(srv: ApiServer, client: wk.Client) -> None:
    """The lazy path reads the initial-events-end bookmark and ERROR lines from the raw
    line: a streaming list completes, and compaction (410 inside the stream) relists."""
    api = cm_api(client)
    for i in range(3):
        await api.create(configmap(f"l{i}"))
    rec = record(api, wk.WatchConfig(initial_list="streaming", lazy_decode=True,
                                     max_unhealthy=None), backoff=wk.ConstantBackoff(0.05))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    assert sorted(ev.name for ev in rec.of(wk.InitApply)) == ["l0", "l1", "l2"]
    # While the watcher is cut off, a change is made and the history compacted past it.
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    srv.create_object(configmap("l3"))
    srv.delete_object("v1", "ConfigMap", "l0")
    srv.compact()
    srv.faults.clear("refuse")
    await rec.wait_for(lambda r: len(r.of(wk.InitDone)) == 2)
    await rec.stop()
    assert any(isinstance(e, wk.Gone) for e in rec.errors()), rec.errors()
    assert set(rec.state()) == {"l1", "l2", "l3"}
