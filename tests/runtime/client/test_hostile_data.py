"""Hostile or broken server data: a typed error (and a retry by a watcher), never an untyped
exception that ends the watcher; and data as deep as the apiserver stores is decoded.

Every test talks HTTP to a raw server on 127.0.0.1 that sends the exact bytes given.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper.client._json import REPR_DEPTH, _encode_deep, bounded_repr, decode_deep
from watchkeeper.client.exec_auth import ExecAuth, ExecPluginError

from .rawserver import RawServer, Request, head, respond, stream

CMS = "/api/v1/namespaces/default/configmaps"
APISERVER_DEPTH = 10_000  # Go encoding/json's maxNestingDepth: what kube-apiserver stores


def nested(depth: int, leaf: str = '"x"') -> str:
    """A JSON value with ``depth`` levels of objects and arrays (alternating)."""
    return '{"a":[' * (depth // 2) + ('{"a":' if depth % 2 else "") + leaf + (
        "}" if depth % 2 else "") + "]}" * (depth // 2)


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, dict | list):
        depth += 1
        value = value["a"] if isinstance(value, dict) else value[0]
    return depth


def cm(name: str, rv: str, spec_depth: int = 0) -> str:
    extra = f',"spec":{nested(spec_depth)}' if spec_depth else ""
    return (f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}",'
            f'"namespace":"default","resourceVersion":"{rv}"}}{extra}}}')


def event(kind: str, obj: str) -> bytes:
    return f'{{"type":"{kind}","object":{obj}}}\n'.encode()


def object_list(*items: str, rv: str = "1", meta: str | None = None) -> bytes:
    meta = meta if meta is not None else f'{{"resourceVersion":"{rv}"}}'
    return f'{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{meta},' \
           f'"items":[{",".join(items)}]}}'.encode()


FAST = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5)


async def collect(api: wk.Api, config: wk.WatchConfig = FAST, n: int = 2) -> list[Any]:
    """Events of a watcher until its ``n``-th error: it must survive (retry) each one."""
    seen: list[Any] = []
    async for ev in wk.watcher(api, config, backoff=wk.ConstantBackoff(0.01)):
        seen.append(ev)
        if len(errors(seen)) == n:
            return seen
    raise AssertionError("the watcher ended")


def errors(events: list[Any]) -> list[wk.ApiError]:
    return [e.error for e in events if isinstance(e, wk.WatchError)]


# -- deep nesting --------------------------------------------------------------------------------


@pytest.mark.parametrize("lazy", [False, True])
async def test_watch_decodes_objects_as_deep_as_the_apiserver_stores(
    raw: RawServer, client: wk.Client, lazy: bool
) -> None:
    raw.routes[CMS] = respond(200, object_list(rv="1"))
    raw.watch_routes[CMS] = stream(event("ADDED", cm("deep", "2", APISERVER_DEPTH - 1)),
                                   event("ADDED", cm("mid", "3", 1_000)), then_hang=True)
    api = client.api("configmaps", namespace="default")
    config = wk.WatchConfig(max_unhealthy=None, lazy_decode=lazy)
    got: list[Any] = []
    async for ev in wk.watcher(api, config, backoff=wk.ConstantBackoff(0.01)):
        assert not isinstance(ev, wk.WatchError), ev
        if isinstance(ev, wk.Apply):
            got.append(ev)
            if len(got) == 2:
                break
    assert [e.name for e in got] == ["deep", "mid"]
    assert depth_of(got[0].obj["spec"]) == APISERVER_DEPTH - 1  # + the object = 10,000
    assert depth_of(got[1].obj["spec"]) == 1_000
    assert got[0].resource_version == "2"


@pytest.mark.parametrize("lazy", [False, True])
async def test_watch_line_beyond_the_apiserver_depth_is_invalid_response_and_retried(
    raw: RawServer, client: wk.Client, lazy: bool
) -> None:
    raw.routes[CMS] = respond(200, object_list(rv="1"))
    raw.watch_routes[CMS] = stream(event("ADDED", cm("evil", "2", 50_000)))
    api = client.api("configmaps", namespace="default")
    seen = await collect(api, wk.WatchConfig(
        max_unhealthy=None, lazy_decode=lazy, server_timeout=5, idle_timeout=5))
    errs = errors(seen)
    assert errs and all(isinstance(e, wk.InvalidResponse) for e in errs)
    assert "nested deeper than" in str(errs[0])
    raw.watch_routes[CMS] = stream(event("ADDED", cm("fine", "3")), then_hang=True)
    async for ev in wk.watcher(api, FAST, backoff=wk.ConstantBackoff(0.01)):
        if isinstance(ev, wk.Apply):
            assert ev.name == "fine"
            break


async def test_lazy_event_decoded_late_is_still_an_object(
    raw: RawServer, client: wk.Client
) -> None:
    raw.watch_routes[CMS] = stream(event("MODIFIED", cm("late", "5", 3_000)), then_hang=True)
    api = client.api("configmaps", namespace="default")
    async with api.watch(resource_version="1", lazy=True) as events:
        async for ev in events:
            assert ev.name == "late"
            assert depth_of(ev.object["spec"]) == 3_000
            break


@pytest.mark.parametrize("lazy", [False, True])
async def test_a_deep_event_can_be_shown_and_logged(
    raw: RawServer, client: wk.Client, lazy: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """repr() of an event as deep as the apiserver stores (and so a log line or an assert
    message showing it) must not raise RecursionError: deep levels are elided."""
    raw.routes[CMS] = respond(200, object_list(rv="1"))
    raw.watch_routes[CMS] = stream(event("ADDED", cm("deep", "2", APISERVER_DEPTH - 1)),
                                   then_hang=True)
    api = client.api("configmaps", namespace="default")
    config = wk.WatchConfig(max_unhealthy=None, lazy_decode=lazy)
    async for ev in wk.watcher(api, config, backoff=wk.ConstantBackoff(0.01)):
        assert not isinstance(ev, wk.WatchError), ev
        if isinstance(ev, wk.Apply):
            break
    assert depth_of(ev.obj["spec"]) == APISERVER_DEPTH - 1
    shown = repr(ev)
    assert shown.startswith("Apply(obj={'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': "
                            "{'name': 'deep', ")
    assert "{'a': [{'a': [" in shown and ("[...]" in shown or "{...}" in shown)
    assert len(shown) < 2_000
    with caplog.at_level("INFO", logger="test.deep"):
        logging.getLogger("test.deep").info("got %r", ev)
    assert caplog.records[-1].getMessage() == f"got {shown}"


def test_bounded_repr_is_the_builtin_repr_within_the_limit() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": [1, 2.5, None, True, ("t",)],
           "deep": json.loads(nested(REPR_DEPTH - 1))}
    assert bounded_repr(obj) == repr(obj)
    assert repr(wk.Apply(obj)) == f"Apply(obj={obj!r})"
    one_more = {"x": json.loads(nested(REPR_DEPTH))}
    assert bounded_repr(one_more) != repr(one_more)
    # The root and 99 levels of the 100 below it: the last dict shown holds an elided list.
    assert bounded_repr(one_more).startswith("{'x': {'a': [{'a': [")
    assert bounded_repr(one_more).endswith("{'a': [...]}" + "]}" * (REPR_DEPTH // 2 - 1) + "}")
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = [cyclic, cyclic]  # a container inside itself: shown as `...`, as repr does
    deep_cycle = {"d": json.loads(nested(200)), "c": cyclic}
    assert "'self': [{...}, {...}]" in bounded_repr(deep_cycle)
    assert bounded_repr(decode_deep(nested(APISERVER_DEPTH).encode()))  # checked without a stack


async def test_list_body_deep_and_too_deep(raw: RawServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    raw.routes[CMS] = respond(200, object_list(cm("deep", "2", APISERVER_DEPTH - 1), rv="9"))
    page = await api.list()
    assert page.resource_version == "9" and depth_of(page.items[0]["spec"]) == 9_999
    raw.routes[CMS] = respond(200, object_list(cm("evil", "2", 30_000)))
    with pytest.raises(wk.InvalidResponse, match="nested deeper than"):
        await api.list()
    raw.routes[CMS] = respond(200, ("[" * 20_000 + "]" * 20_000).encode())
    with pytest.raises(wk.InvalidResponse):
        await api.list()
    raw.routes[CMS + "/x"] = respond(200, b'{"a":' * 5_000 + b"1" + b"}" * 5_000)
    assert depth_of(await api.get("x")) == 5_000


async def test_a_deep_object_read_can_be_written_back(raw: RawServer, client: wk.Client) -> None:
    """What was decoded (an object at the apiserver's depth) is encoded for a write too."""
    deep = cm("deep", "2", APISERVER_DEPTH - 1)
    raw.routes[CMS + "/deep"] = respond(200, deep.encode())
    api = client.api("configmaps", namespace="default")
    obj = await api.get("deep")
    received: list[bytes] = []

    async def echo(req: Request, w: asyncio.StreamWriter) -> None:
        received.append(req.body)
        w.write(head(200, length=len(req.body)) + req.body)
        await w.drain()

    raw.routes[CMS + "/deep"] = echo
    back = await api.replace("deep", obj)
    assert received and depth_of(back["spec"]) == APISERVER_DEPTH - 1
    assert received[0] == deep.encode()  # (deep dicts cannot be compared: they recurse)


@pytest.mark.parametrize("depth", [2_000, 50_000])
async def test_deep_error_body_is_still_a_typed_error(
    raw: RawServer, client: wk.Client, depth: int
) -> None:
    body = ('{"kind":"Status","apiVersion":"v1","code":503,"reason":"ServiceUnavailable",'
            f'"message":"busy","details":{nested(depth)}}}').encode()
    raw.routes[CMS] = respond(503, body)
    with pytest.raises(wk.ServerError) as info:
        await client.api("configmaps", namespace="default").list()
    assert info.value.code == 503
    assert "busy" in str(info.value) and "ServerError" in repr(info.value)


async def test_deep_error_event_in_a_watch_is_typed(raw: RawServer, client: wk.Client) -> None:
    status = ('{"kind":"Status","apiVersion":"v1","code":500,"reason":"InternalError",'
              f'"message":{nested(1_500)}}}')
    raw.routes[CMS] = respond(200, object_list(rv="1"))
    raw.watch_routes[CMS] = stream(event("ERROR", status))
    seen = await collect(client.api("configmaps", namespace="default"))
    errs = errors(seen)
    assert errs and isinstance(errs[0], wk.ServerError), errs
    assert "InternalError" in str(errs[0])  # the message was no string: the reason stands in


# -- malformed Status and list shapes -------------------------------------------------------------


@pytest.mark.parametrize("details", ['"oops"', '["a", 1]', "7", "null"])
async def test_status_with_malformed_details(
    raw: RawServer, client: wk.Client, details: str
) -> None:
    body = ('{"kind":"Status","apiVersion":"v1","code":429,"reason":"TooManyRequests",'
            f'"message":"slow down","details":{details}}}').encode()
    raw.routes[CMS] = respond(429, body)
    with pytest.raises(wk.TooManyRequests) as info:
        await client.api("configmaps", namespace="default").list()
    assert info.value.details == {} and info.value.retry_after is None
    raw.routes[CMS] = respond(200, object_list(rv="1"))
    raw.watch_routes[CMS] = stream(event("ERROR", body.decode()))
    seen = await collect(client.api("configmaps", namespace="default"))
    assert isinstance(errors(seen)[0], wk.TooManyRequests)


@pytest.mark.parametrize(
    "body",
    [
        object_list(meta='"a string"'),
        object_list(meta='{"resourceVersion":"1","continue":{"a":1}}'),
        object_list("null", rv="1"),
        object_list(cm("a", "1"), "null", "5", rv="1"),
        object_list(meta='{"resourceVersion":7}'),
        object_list(meta='{"resourceVersion":"1","remainingItemCount":"many"}'),
        b'{"kind":"ConfigMapList","metadata":{},"items":{"a":1}}',
        b'["not","a","list","object"]',
    ],
    ids=["meta-string", "continue-map", "null-item", "null-among-items", "rv-number",
         "remaining-string", "items-map", "array"],
)
async def test_malformed_list_is_invalid_response_and_the_watcher_retries(
    raw: RawServer, client: wk.Client, body: bytes
) -> None:
    api = client.api("configmaps", namespace="default")
    raw.routes[CMS] = respond(200, body)
    with pytest.raises(wk.InvalidResponse):
        await api.list()
    with pytest.raises(wk.InvalidResponse):  # the prefetching pager checks pages the same way
        await api.list_all()
    seen: list[Any] = []
    async for ev in wk.watcher(api, FAST, backoff=wk.ConstantBackoff(0.01)):
        seen.append(ev)
        if isinstance(ev, wk.WatchError):
            assert isinstance(ev.error, wk.InvalidResponse), ev.error
            if len(errors(seen)) == 2:  # retried, and still typed
                raw.routes[CMS] = respond(200, object_list(cm("good", "3"), rv="3"))
        if isinstance(ev, wk.InitDone):
            break
    assert any(isinstance(e, wk.InitApply) and e.name == "good" for e in seen)


# -- discovery -----------------------------------------------------------------------------------


GROUPS = (b'{"kind":"APIGroupList","groups":[{"name":"example.com","versions":[{"groupVersion":'
          b'"example.com/v1","version":"v1"}],"preferredVersion":{"groupVersion":"example.com/v1",'
          b'"version":"v1"}}]}')


@pytest.mark.parametrize(
    "apis, resources",
    [
        (b"<html><body>Welcome to nginx!</body></html>", None),
        (b'{"groups":[{"preferredVersion":{"version":"v1"}}]}', None),  # a group without name
        (b'{"groups":"all"}', None),
        (b"[" * 5_000 + b"]" * 5_000, None),
        (GROUPS, b'{"resources":[{"name":"widgets","namespaced":true}]}'),  # no kind
        (GROUPS, b'{"resources":[{"name":"widgets","kind":"Widget","namespaced":"yes"}]}'),
        (GROUPS, b'<html>502 Bad Gateway</html>'),
    ],
    ids=["html-apis", "group-no-name", "groups-string", "deep-apis", "no-kind",
         "namespaced-string", "html-group"],
)
async def test_malformed_discovery_is_invalid_response(
    raw: RawServer, client: wk.Client, apis: bytes, resources: bytes | None
) -> None:
    raw.routes["/apis"] = respond(200, apis, {"Content-Type": "text/html"})
    if resources is not None:
        raw.routes["/apis/example.com/v1"] = respond(200, resources)
    raw.routes["/api/v1"] = respond(200, b'{"kind":"APIResourceList","resources":[]}')
    api = client.api("widgets.example.com", namespace="default")
    with pytest.raises(wk.InvalidResponse) as info:
        await api.list()
    assert info.value.path.startswith(("/apis", "/api"))
    seen = await collect(api)
    assert all(isinstance(e, wk.InvalidResponse) for e in errors(seen))


async def test_wellformed_discovery_still_resolves(raw: RawServer, client: wk.Client) -> None:
    raw.routes["/apis"] = respond(200, GROUPS)
    raw.routes["/apis/example.com/v1"] = respond(
        200, b'{"resources":[{"name":"widgets/status","kind":"Widget","namespaced":true},'
             b'{"name":"widgets","singularName":"widget","kind":"Widget","namespaced":true,'
             b'"shortNames":["wg"],"verbs":["get"]}]}')
    for name in ("widgets.example.com", "wg", "widget", "Widget"):
        res = await client.api(name, namespace="default").resource()
        assert (res.group, res.version, res.kind, res.plural, res.namespaced) == (
            "example.com", "v1", "Widget", "widgets", True)


# -- exec plugins --------------------------------------------------------------------------------


async def test_exec_plugin_printing_deep_json_is_exec_plugin_error(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import sys\n"
        "sys.stdout.write('[' * 100000 + ']' * 100000)\n"
        "sys.stderr.write('oops')\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    for code in (0, 1):
        auth = ExecAuth(sys.executable, [str(plugin), str(code)])
        with pytest.raises(ExecPluginError):
            await auth.headers()
    ok = tmp_path / "ok.py"
    ok.write_text("print(" + repr(json.dumps({
        "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
        "status": {"token": "t"}})) + ")\n")
    assert await ExecAuth(sys.executable, [str(ok)]).headers() == {"Authorization": "Bearer t"}


# -- the iterative decoder agrees with msgspec where both work ----------------------------------

JSONS = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(JSONS, st.booleans())
def test_deep_decoder_matches_msgspec(value: Any, pretty: bool) -> None:
    data = json.dumps(value, indent=2 if pretty else None, ensure_ascii=not pretty).encode()
    assert decode_deep(data) == msgspec.json.decode(data)


@pytest.mark.parametrize("bad", [b"", b"{", b"[1,]", b'{"a":1,}', b"tru", b"1 2", b'{"a" 1}',
                                 b'"\x01"', b"[01]", b"\xff", b"{1:2}", b"[-]", b"nul"])
def test_deep_decoder_rejects_what_msgspec_rejects(bad: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(bad)
    with pytest.raises(msgspec.DecodeError):
        decode_deep(bad)


@settings(max_examples=300, deadline=None)
@given(JSONS)
def test_deep_encoder_matches_msgspec(value: Any) -> None:
    assert _encode_deep(value).encode() == msgspec.json.encode(value)
