"""A LIST answer must be a list of the kind asked for (issue 21, item 6).

A 200 with ``{}``, ``{"status": "ok"}``, a Success Status or another kind's list used to be
taken as an empty list: on a relist the cache reported every object deleted while the
watcher said healthy. Now it is an ``InvalidResponse`` naming what was expected and what
came, retried like any other, and the cache is left alone. Every test talks HTTP to a raw
server on 127.0.0.1 that sends the exact bytes given; the real kube-apiserver bodies of
tests/fixtures/apiserver-1.28 are still accepted.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk

from .rawserver import RawServer, Request, respond, stream

CMS = "/api/v1/namespaces/default/configmaps"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"
FAST = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5)
GONE = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},'
        b'"status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired",'
        b'"code":410}}\n')


def cm(name: str, rv: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
            "data": {"k": name}}


def cm_list(*names: str, rv: str = "5", token: str | None = None) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if token:
        meta["continue"] = token
    return json.dumps({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta,
                       "items": [cm(n) for n in names]}).encode()


NOT_A_LIST = {
    "empty-object": (b"{}", "a JSON object without kind (keys: none)"),
    "status-ok": (b'{"status": "ok"}', "a JSON object without kind (keys: 'status')"),
    "success-status": (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",'
                       b'"code":200}', "a Status (status 'Success'"),
    "podlist": (b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},'
                b'"items":[]}', "kind 'PodList' ('v1')"),
    "other-group": (b'{"kind":"ConfigMapList","apiVersion":"example.com/v1","metadata":{},'
                    b'"items":[]}', "kind 'ConfigMapList' ('example.com/v1')"),
    "no-items": (b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":'
                 b'{"resourceVersion":"5"}}', "'ConfigMapList' without items"),
    "one-object": (json.dumps({"kind": "ConfigMap", "apiVersion": "v1", **cm("a")}).encode(),
                   "kind 'ConfigMap' ('v1')"),
}


@pytest.mark.parametrize("body, came", list(NOT_A_LIST.values()), ids=list(NOT_A_LIST))
async def test_an_answer_that_is_not_a_list_of_the_kind_asked_for_is_invalid_response(
    raw: RawServer, client: wk.Client, body: bytes, came: str
) -> None:
    api = client.api("configmaps", namespace="default")
    raw.routes[CMS] = respond(200, body)
    with pytest.raises(wk.InvalidResponse) as one:
        await api.list()
    assert "expected a ConfigMapList (v1) as the answer to a LIST, got " + came in str(one.value)
    with pytest.raises(wk.InvalidResponse, match="expected a ConfigMapList"):
        await api.list_all()  # the prefetching pager checks every page the same way


def fixture_lists() -> list[Any]:
    """Every LIST of configmaps that kube-apiserver 1.28 answered in the reference pack
    (but the Tables, which ``Api.list`` never asks for)."""
    out = []
    for path in sorted(FIXTURES.glob("*.json")):
        record = json.loads(path.read_text())
        request, response = record["request"], record["response"]
        body = response.get("body")
        if (request["method"] == "GET" and response["status"] == 200
                and request["path"].endswith("/configmaps") and isinstance(body, dict)
                and "watch" not in request["query"] and body.get("kind") != "Table"):
            out.append(pytest.param(record, id=path.stem))
    return out


@pytest.mark.parametrize("record", fixture_lists())
async def test_real_apiserver_list_bodies_are_accepted(
    raw: RawServer, client: wk.Client, record: dict[str, Any]
) -> None:
    body = record["response"]["body"]
    accept = record["request"]["headers"].get("Accept", "")
    raw.routes[record["request"]["path"]] = respond(200, json.dumps(body).encode())
    ns = record["request"]["path"].split("/")[4] if "/namespaces/" in record["request"][
        "path"] else None
    api = client.api("configmaps", namespace=ns)
    page = await api.list(metadata_only="PartialObjectMetadataList" in accept)
    assert [o["metadata"]["name"] for o in page.items] == [
        o["metadata"]["name"] for o in body["items"]]
    assert page.resource_version == body["metadata"]["resourceVersion"]


async def test_a_metadata_only_list_must_be_partial_object_metadata(
    raw: RawServer, client: wk.Client
) -> None:
    raw.routes[CMS] = respond(200, cm_list("a"))
    api = client.api("configmaps", namespace="default")
    assert [o["metadata"]["name"] for o in (await api.list()).items] == ["a"]
    with pytest.raises(wk.InvalidResponse, match=r"expected a PartialObjectMetadataList "
                       r"\(meta.k8s.io/v1\) as the answer to a LIST, got kind 'ConfigMapList'"):
        await api.list(metadata_only=True)


WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


async def test_a_custom_resource_list_is_its_kind_list_in_its_group(
    raw: RawServer, client: wk.Client
) -> None:
    """The kind of a resource found by discovery is known (the Resource carries it); only
    a Resource built without a kind accepts any ``...List`` (of its group/version)."""
    widget = wk.Resource("example.com", "v1", "Widget", "widgets")
    real = json.loads((FIXTURES / "138-widgets-first-served.json").read_text())["response"]
    assert real["body"]["items"] == []  # a real empty list has "items": [], not nothing
    raw.routes[WIDGETS] = respond(200, json.dumps(real["body"]).encode())
    assert (await client.api(widget, namespace="default").list()).items == []
    gadgets = b'{"kind":"GadgetList","apiVersion":"example.com/v1","metadata":{},"items":[]}'
    raw.routes[WIDGETS] = respond(200, gadgets)
    with pytest.raises(wk.InvalidResponse, match=r"expected a WidgetList \(example\.com/v1\)"):
        await client.api(widget, namespace="default").list()
    unknown = wk.Resource("example.com", "v1", "", "widgets")
    assert (await client.api(unknown, namespace="default").list()).items == []
    raw.routes[WIDGETS] = respond(200, b'{"kind":"Status","apiVersion":"v1","status":"Success"}')
    with pytest.raises(wk.InvalidResponse, match=r"expected a \.\.\.List \(example.com/v1\)"):
        await client.api(unknown, namespace="default").list()


# -- the watcher and its cache ---------------------------------------------------------------


def answers(*bodies: bytes) -> tuple[Any, list[int]]:
    """A LIST route answering ``bodies`` in turn (the last one from then on)."""
    served = [0]

    async def handler(req: Request, w: asyncio.StreamWriter) -> None:
        body = bodies[min(served[0], len(bodies) - 1)]
        served[0] += 1
        await respond(200, body)(req, w)

    return handler, served


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("bad", [b"{}", NOT_A_LIST["success-status"][0],
                                 NOT_A_LIST["podlist"][0]], ids=["empty", "status", "podlist"])
async def test_a_relist_answered_with_no_list_keeps_the_cache_and_is_retried(
    raw: RawServer, client: wk.Client, lazy: bool, bad: bytes
) -> None:
    """The watch is refused with 410 Gone, so the watcher relists; the relist gets no list.
    Before, that was an empty list: InitDone, and every cached object reported deleted."""
    raw.routes[CMS], _ = answers(cm_list("a", "b"), bad, bad, cm_list("a"))
    raw.watch_routes[CMS] = stream(GONE)
    store, writer = wk.Store.new()
    api = client.api("configmaps", namespace="default")
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5,
                            lazy_decode=lazy)
    seen: list[Any] = []
    async with asyncio.timeout(20):
        async for ev in wk.reflector(writer, wk.watcher(api, config,
                                                        backoff=wk.ConstantBackoff(0.01))):
            seen.append(ev)
            if len([e for e in seen if isinstance(e, wk.InitDone)]) == 2:
                break
            if isinstance(ev, wk.WatchError) and isinstance(ev.error, wk.InvalidResponse):
                assert sorted(wk.meta.name(o) for o in store) == ["a", "b"]
                assert store.ready is False  # degraded while it cannot list
    errors = [type(e.error).__name__ for e in seen if isinstance(e, wk.WatchError)]
    # 410, then the two bad answers (retried, each a typed error), then the good one.
    assert errors == ["Gone", "InvalidResponse", "InvalidResponse"]
    # No Delete until a relist got a list: then only what that list no longer has.
    assert [e.name for e in seen if isinstance(e, wk.Delete)] == ["b"]
    assert sorted(wk.meta.name(o) for o in store) == ["a"]


async def test_a_later_page_that_is_not_a_list_fails_the_whole_relist(
    raw: RawServer, client: wk.Client
) -> None:
    """Page 1 is a list with a continue token, page 2 is ``{}``: list_all fails whole, and
    the watcher commits nothing of page 1 (no InitDone; the cache keeps what it had)."""
    bad_pages = [1]

    async def pages(req: Request, w: asyncio.StreamWriter) -> None:
        if "continue" not in req.query:
            body = cm_list("a", token="page-2")
        elif bad_pages[0] > 0:
            bad_pages[0] -= 1
            body = b"{}"
        else:
            body = cm_list("b")
        await respond(200, body)(req, w)

    raw.routes[CMS] = pages
    raw.watch_routes[CMS] = stream(GONE)
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.InvalidResponse, match="got a JSON object without kind"):
        await api.list_all(page_size=1)
    bad_pages[0] = 2
    store, writer = wk.Store.new()
    writer.apply(wk.InitStart())
    for name in ("a", "b", "c"):
        writer.apply(wk.InitApply(cm(name)))
    writer.apply(wk.InitDone())
    seen: list[Any] = []
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5, page_size=1)
    async with asyncio.timeout(20):
        async for ev in wk.reflector(writer, wk.watcher(api, config,
                                                        backoff=wk.ConstantBackoff(0.01))):
            seen.append(ev)
            if isinstance(ev, wk.WatchError):
                assert sorted(wk.meta.name(o) for o in store) == ["a", "b", "c"]
            if isinstance(ev, wk.InitDone):
                break
    assert [type(e).__name__ if not isinstance(e, wk.WatchError) else type(e.error).__name__
            for e in seen] == ["InitStart", "InitApply", "InvalidResponse",  # page 1, page 2
                               "InitStart", "InitApply", "InvalidResponse",
                               "InitStart", "InitApply", "InitApply", "Delete", "InitDone"]
    # The relist that worked: a (page 1) and b (page 2); c vanished meanwhile.
    assert [e.name for e in seen if isinstance(e, wk.Delete)] == ["c"]
    assert sorted(wk.meta.name(o) for o in store) == ["a", "b"]
