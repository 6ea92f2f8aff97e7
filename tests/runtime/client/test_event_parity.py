"""Eager and lazy watch streams give the same typed result for every line (issue 21, item 7).

A watch object whose ``metadata`` was a string, or a BOOKMARK whose resourceVersion was a
number, passed the eager stream (the object then keyed ``(None, "")`` in a store) and failed
the lazy one; an object without a name passed both. Now both refuse the same lines, as an
``InvalidResponse`` in the same words, and nothing without a name reaches a store (a LIST
item is held to the same). Lines are served by a raw server on 127.0.0.1 (the bytes as
given).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper.client.stream import open_stream

from .rawserver import RawServer, respond, stream

CMS = "/api/v1/namespaces/default/configmaps"
LIST = (b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},'
        b'"items":[]}')


def line(kind: str, obj: Any) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def good(name: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": name},
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rv}}


# -- the property ------------------------------------------------------------------------------

HOSTILE = st.sampled_from([None, 0, 7, -1, 1.5, True, "", "x", [], ["a"], {}, {"a": 1}])
OBJECT_TYPES = ["ADDED", "MODIFIED", "DELETED", "SOMETHING"]


@st.composite
def metadata(draw: st.DrawFn, named: bool) -> Any:
    """Key fields as a server may send them: right, missing, or of any wrong type."""
    meta: dict[str, Any] = {}
    for key, value in (("name", "cm"), ("namespace", "default"), ("resourceVersion", "5")):
        if key == "name" and not named:
            value = None  # a bookmark or a Status has none
        how = draw(st.sampled_from(["right"] * 8 + ["missing", "hostile"]))
        if how == "right" and value is not None:
            meta[key] = value
        elif how == "hostile":
            meta[key] = draw(HOSTILE)
    if draw(st.booleans()):
        meta["labels"] = draw(st.sampled_from([{"a": "b"}, {"a": 1}, "x", None]))
    return draw(st.sampled_from([meta] * 12 + [None, "x", 5, ["x"]]))


@st.composite
def watch_line(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from([*OBJECT_TYPES, "BOOKMARK", "ERROR"]))
    if kind == "ERROR":
        obj: Any = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                    "reason": "Expired", "message": "too old resource version"}
    else:
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}
    meta = draw(metadata(kind in OBJECT_TYPES))
    if meta is not None or draw(st.booleans()):  # none, or null
        obj["metadata"] = meta
    obj = draw(st.sampled_from([obj] * 16 + [None, "x", 3, [obj]]))
    return line(kind, obj)


Outcome = tuple[list[tuple[str, str, str, str]], str, str]


async def outcome(raw: RawServer, client: wk.Client, lazy: bool, piece: int) -> Outcome:
    """What one watch stream makes of the body: its events, then its error (class, words)."""
    got: list[tuple[str, str, str, str]] = []
    try:
        async with open_stream(client.transport, CMS, lazy=lazy, piece=piece) as events:
            async for ev in events:
                if ev.type != "BOOKMARK":
                    assert ev.name, ev  # never an object event without a name
                got.append((ev.type, ev.namespace, ev.name, ev.resource_version))
                assert ev.object is not None  # a lazy event decodes without failing
    except wk.ApiError as exc:
        return got, type(exc).__name__, exc.message
    return got, "", ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(watch_line(), min_size=1, max_size=6),
       good_before=st.integers(0, 2), piece=st.sampled_from([1, 1 << 16]))
def test_eager_and_lazy_streams_agree_on_every_line(
    lines: list[bytes], good_before: int, piece: int
) -> None:
    """The same hostile lines, served to an eager and a lazy stream, give the same events
    and the same typed error with the same message, decoded per line (piece=1) or as one
    piece (the fast path)."""
    body = b"".join([line("ADDED", good(f"g{i}", str(i + 1))) for i in range(good_before)]
                    + lines)

    async def both() -> tuple[Outcome, Outcome]:
        async with RawServer() as raw:
            raw.routes[CMS] = stream(body)
            async with wk.Client(wk.ClientConfig(server=raw.url)) as client:
                return (await outcome(raw, client, False, piece),
                        await outcome(raw, client, True, piece))

    eager, lazy = asyncio.run(both())
    event(f"{eager[1] or 'no error'} after {len(eager[0])} events")
    assert eager == lazy
    assert eager[1] in ("", "InvalidResponse", "Gone")


# -- the shapes the issue names, through the watcher -----------------------------------------

MALFORMED = {
    "metadata-string": line("ADDED", {"kind": "ConfigMap", "metadata": "x"}),
    "metadata-missing": line("ADDED", {"kind": "ConfigMap", "data": {}}),
    "metadata-null": line("MODIFIED", {"kind": "ConfigMap", "metadata": None}),
    "object-not-a-map": line("ADDED", ["x"]),
    "name-missing": line("ADDED", {"metadata": {"namespace": "default",
                                                "resourceVersion": "3"}}),
    "name-empty": line("ADDED", {"metadata": {"name": "", "namespace": "default"}}),
    "name-number": line("DELETED", {"metadata": {"name": 5, "namespace": "default"}}),
    "namespace-number": line("ADDED", {"metadata": {"name": "x", "namespace": 5}}),
    "rv-number": line("ADDED", {"metadata": {"name": "x", "resourceVersion": 3}}),
    "bookmark-rv-number": line("BOOKMARK", {"metadata": {"resourceVersion": 3}}),
    "bookmark-metadata-string": line("BOOKMARK", {"metadata": "x"}),
    "error-metadata-list": line("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                                          "metadata": ["x"]}),
}


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("bad", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_a_malformed_object_is_invalid_response_in_both_modes_and_never_stored(
    raw: RawServer, client: wk.Client, bad: bytes, lazy: bool
) -> None:
    raw.routes[CMS] = respond(200, LIST)
    raw.watch_routes[CMS] = stream(line("ADDED", good("a", "2")), bad, then_hang=True)
    store, writer = wk.Store.new()
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5,
                            lazy_decode=lazy)
    api = client.api("configmaps", namespace="default")
    errors: list[wk.ApiError] = []
    async with asyncio.timeout(20):
        async for ev in wk.reflector(writer, wk.watcher(api, config,
                                                        backoff=wk.ConstantBackoff(0.01))):
            if isinstance(ev, wk.WatchError):
                errors.append(ev.error)
                if len(errors) == 2:
                    break
    assert all(isinstance(e, wk.InvalidResponse) for e in errors), errors
    assert "undecodable watch event" in str(errors[0])
    assert store.keys() == [("default", "a")]  # nothing keyed without a name


@pytest.mark.parametrize("item, problem", [
    ({"metadata": "x"}, "items[1]: metadata is str, not a map"),
    ({"data": {}}, "items[1]: metadata is null, not a map"),
    ({"metadata": {"namespace": "default"}}, "items[1]: metadata.name is missing or empty"),
    ({"metadata": {"name": ""}}, "items[1]: metadata.name is missing or empty"),
    ({"metadata": {"name": 7}}, "items[1]: metadata.name is int, not a string"),
    ({"metadata": {"name": "b", "namespace": ["x"]}}, "metadata.namespace is list"),
    ({"metadata": {"name": "b", "resourceVersion": 9}}, "metadata.resourceVersion is int"),
])
async def test_a_list_item_without_a_usable_name_is_invalid_response(
    raw: RawServer, client: wk.Client, item: dict[str, Any], problem: str
) -> None:
    """Nothing is ever keyed (namespace, ""): the item that has no name is refused."""
    body = json.dumps({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {},
                       "items": [good("a", "2"), item]}).encode()
    raw.routes[CMS] = respond(200, body)
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.InvalidResponse, match=re.escape(problem)):
        await api.list()
    with pytest.raises(wk.InvalidResponse, match=re.escape(problem)):
        await api.list_all()


def test_the_store_refuses_an_object_without_a_name() -> None:
    """What the decoding guarantees, the store holds to as well: a caller's own event with
    no name is refused, not stored under (namespace, "")."""
    store, writer = wk.Store.new()
    for nameless in (wk.Apply({"metadata": {"namespace": "ns"}}), wk.Apply({"metadata": "x"}),
                     wk.Delete({}), wk.InitApply({"metadata": {"name": ""}})):
        with pytest.raises(ValueError, match=r"without metadata\.name cannot be stored"):
            writer.apply(nameless)
    assert store.keys() == []
    writer.apply(wk.Apply({"metadata": {"name": "a", "namespace": "ns"}}))
    assert store.keys() == [("ns", "a")]
    own, own_writer = wk.Store.new(key=lambda obj: ("all", obj.get("id", "")))
    own_writer.apply(wk.Apply({"id": ""}))  # a key function of one's own decides itself
    assert own.keys() == [("all", "")]
