"""Contract tests for writes: PATCH results (merge, JSON, strategic, apply with a JSON body),
unconditional PUT, CRD establishment and discovery, custom resource updates through the main
resource and the status subresource, the CR Table, and a CR watch while its CRD is deleted
(reference files 097-099, 106, 111, 137-139, 141-144, 146, 150, 154).

Bodies are compared whole, key order included, after masking the values that depend on time,
uid or resourceVersion. Requests carry curl's User-Agent, as in the pack, because the
managedFields manager is derived from it."""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .test_contract import assert_same_status, ctype, load, replay
from .test_contract import world as world

CURL = "curl/7.88.1"
_VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "time",
             "lastTransitionTime"}


def scrub(value: Any) -> Any:
    """The value with time-, uid- and resourceVersion-dependent leaves masked (order kept)."""
    if isinstance(value, dict):
        return {k: ("*" if k in _VOLATILE and isinstance(v, str) else scrub(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def assert_same_object(got: Any, want: Any) -> None:
    """Equal after scrubbing, with the same key order at every level."""
    have, need = (json.dumps(scrub(x), indent=1).splitlines() for x in (got, want))
    assert have == need, "\n".join(difflib.unified_diff(need, have, "reference", "simulator",
                                                         lineterm="", n=2))


@pytest.fixture
async def curl(world: Any) -> AsyncIterator[tuple[ApiServer, aiohttp.ClientSession]]:
    """The contract world, but a session that identifies as curl like the capture did."""
    srv, _ = world
    async with aiohttp.ClientSession(headers={"User-Agent": CURL}) as session:
        yield srv, session


def with_meta(body: Any, obj: dict[str, Any], *keys: str) -> Any:
    """The reference request body with metadata keys taken from our live object."""
    body = json.loads(json.dumps(body))
    for key in keys:
        body["metadata"][key] = obj["metadata"][key]
    return body


async def get(srv: ApiServer, session: aiohttp.ClientSession, path: str) -> tuple[int, Any, Any]:
    headers = {"Authorization": f"Bearer {srv.token('admin')}"}
    async with session.get(srv.url + path, headers=headers) as resp:
        text = await resp.text()
        body = json.loads(text) if ctype(resp.headers) == "application/json" else text
        return resp.status, body, resp.headers


# ---- configmap patches and PUT (097-099, 106, 111) ---------------------------------------


async def _target(srv: ApiServer, session: aiohttp.ClientSession) -> dict[str, Any]:
    """The pack's errors/target before 097: created by curl with a=updated, b=2, app=x."""
    srv.delete_object("v1", "ConfigMap", "target", namespace="errors")
    async with session.post(srv.url + "/api/v1/namespaces/errors/configmaps", json={
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "target", "labels": {"app": "x"}},
            "data": {"a": "updated", "b": "2"}},
            headers={"Authorization": f"Bearer {srv.token('admin')}"}) as resp:
        assert resp.status == 201
        created: dict[str, Any] = await resp.json()
        return created


async def test_097_098_099_111_patches_and_unconditional_put(curl: Any) -> None:
    srv, session = curl
    obj = await _target(srv, session)
    rv = int(obj["metadata"]["resourceVersion"])
    for number in (97, 98, 99):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert status == 200 and ctype(headers) == "application/json"
        assert_same_object(body, ref["response"]["body"])
        assert int(body["metadata"]["resourceVersion"]) > rv
        rv = int(body["metadata"]["resourceVersion"])
    ref = load(111)
    assert "resourceVersion" not in ref["request"]["body"]["metadata"]
    status, body, headers = await replay(srv, session, ref,
                                         body=with_meta(ref["request"]["body"], body, "uid"))
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(body, ref["response"]["body"])
    assert int(body["metadata"]["resourceVersion"]) > rv
    stored = srv.get_object("v1", "ConfigMap", "target", namespace="errors")
    assert stored["data"] == ref["response"]["body"]["data"]


async def test_106_apply_with_a_json_body(curl: Any) -> None:
    srv, session = curl
    for number in (103, 105):
        ref = load(number)
        status, body, _ = await replay(srv, session, ref)
        assert status == ref["response"]["status"]
        assert_same_object(body, ref["response"]["body"])
    ref = load(106)
    status, body, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(body, ref["response"]["body"])


# ---- CRDs: establishment, first served, discovery (137-139) --------------------------------


async def test_137_138_139_crd_established_served_and_discovered(curl: Any) -> None:
    srv, session = curl
    ref = load(138)
    before = ref["notes"]["poll_log"][0]
    status, body, headers = await replay(srv, session, ref)
    assert (status, headers["Content-Type"], body) == (
        before["status"], before["content_type"], before["body_prefix"])
    posted = time.monotonic()
    status, created, _ = await replay(srv, session, load(136))
    assert status == 201
    assert_same_object(created, load(136)["response"]["body"])
    # the resource is served at once (the real server: the first poll after the POST, ~0.1 s)
    status, body, headers = await replay(srv, session, ref)
    assert time.monotonic() - posted < 1.0
    assert status == 200 and ctype(headers) == "application/json"
    want = ref["response"]["body"]
    assert_same_object(body, want)
    assert body["metadata"]["resourceVersion"] != ""
    ref = load(137)
    status, body, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert_same_object(body, ref["response"]["body"])
    assert int(body["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    ref = load(139)
    status, body, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert body == ref["response"]["body"]


# ---- custom resource updates (141-144, 146), Table (150) -----------------------------------


async def _widgets(srv: ApiServer, session: aiohttp.ClientSession) -> dict[str, Any]:
    """The CRD of 136 and the Widget w1 of 140, as curl made them."""
    status, _, _ = await replay(srv, session, load(136))
    assert status == 201
    ref = load(140)
    status, body, _ = await replay(srv, session, ref)
    assert status == 201
    assert_same_object(body, ref["response"]["body"])
    created: dict[str, Any] = body
    return created


async def test_141_to_146_custom_resource_spec_and_status(curl: Any) -> None:
    srv, session = curl
    live = await _widgets(srv, session)
    for number in (141, 142, 143):
        ref = load(number)
        body_in = with_meta(ref["request"]["body"], live, "uid", "resourceVersion")
        status, body, headers = await replay(srv, session, ref, body=body_in)
        assert status == 200 and ctype(headers) == "application/json", (number, body)
        assert_same_object(body, ref["response"]["body"])
        assert int(body["metadata"]["resourceVersion"]) > int(live["metadata"]["resourceVersion"])
        live = body
    stored = srv.get_object("example.com/v1", "Widget", "w1")
    assert "labels" not in stored["metadata"]  # 142: label sent to /status is not stored
    for number in (144, 146):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert status == 200 and ctype(headers) == "application/json", (number, body)
        assert_same_object(body, ref["response"]["body"])
    assert srv.get_object("example.com/v1", "Widget", "w1")["metadata"]["generation"] == 4


async def _w2(srv: ApiServer, session: aiohttp.ClientSession) -> None:
    headers = {"Authorization": f"Bearer {srv.token('admin')}"}
    async with session.post(srv.url + "/apis/example.com/v1/namespaces/default/widgets", json={
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w2"}, "spec": {"size": 1}}, headers=headers) as resp:
        assert resp.status == 201


async def _widgets_as_in_146(srv: ApiServer, session: aiohttp.ClientSession) -> None:
    live = await _widgets(srv, session)
    for number in (141, 142, 143, 144, 146):
        ref = load(number)
        body_in = (with_meta(ref["request"]["body"], live, "uid", "resourceVersion")
                   if ref["request"]["method"] == "PUT" else ref["request"]["body"])
        status, live, _ = await replay(srv, session, ref, body=body_in)
        assert status == 200
    await _w2(srv, session)


async def test_150_custom_resource_table(curl: Any) -> None:
    srv, session = curl
    await _widgets_as_in_146(srv, session)
    ref = load(150)
    status, body, headers = await replay(srv, session, ref)
    want = ref["response"]["body"]
    assert status == 200 and ctype(headers) == "application/json"
    assert list(body) == list(want) and list(body["metadata"]) == list(want["metadata"])
    assert body["columnDefinitions"] == want["columnDefinitions"]
    assert len(body["rows"]) == len(want["rows"])
    for got, exp in zip(body["rows"], want["rows"], strict=True):
        assert list(got) == list(exp)
        assert got["cells"][0] == exp["cells"][0] and len(got["cells"]) == len(exp["cells"])
        assert got["cells"][1].endswith("s")  # an age of seconds, like the capture's "1s"
        assert_same_object(got["object"], exp["object"])


# ---- a CR watch while the CRD is deleted (154) ---------------------------------------------


async def test_154_watch_during_crd_delete() -> None:
    # default bookmark timing (the world fixture's 0.2 s would put BOOKMARKs in the stream)
    async with ApiServer() as srv, aiohttp.ClientSession(headers={"User-Agent": CURL}) as s:
        await _watch_during_crd_delete(srv, s)


async def _watch_during_crd_delete(srv: ApiServer, session: aiohttp.ClientSession) -> None:
    await _widgets_as_in_146(srv, session)
    ref = load(154)
    want = ref["response"]
    r = ref["request"]
    rv = srv.store.rv
    headers = {"Authorization": f"Bearer {srv.token('admin')}"}
    url = srv.url + r["path"] + f"?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
    async with session.get(url, headers=headers) as resp:
        assert resp.status == 200 and ctype(resp.headers) == "application/json"
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        await asyncio.sleep(0.1)
        status, deleted, _ = await replay(srv, session, load(153))
        started = time.monotonic()
        assert status == 200
        assert_same_object(deleted, load(153)["response"]["body"])  # Terminating condition
        # the resource is gone at once (404 text/plain) while the stream is still open
        gone = await get(srv, session, r["path"])
        assert_same_status(load(155), *gone)
        lines = []
        async for raw in resp.content:
            if raw.strip():
                lines.append((json.loads(raw), time.monotonic() - started))
        ended = time.monotonic() - started
        # the server ended the chunked body cleanly (aiohttp would raise on a cut stream)
    assert [x["type"] for x, _ in lines] == [x["type"] for x in want["lines"]]
    for (got, _), exp in zip(lines, want["lines"], strict=True):
        assert_same_object(got["object"], exp["object"])
    rvs = [int(x["object"]["metadata"]["resourceVersion"]) for x, _ in lines]
    assert rvs == sorted(rvs) and rvs[0] > int(deleted["metadata"]["resourceVersion"])
    # DELETED lines within ~35 ms of the DELETE, the stream closed about a second later
    assert all(at < 0.5 for _, at in lines)
    ref_end = want["stream_end_at_s"] - ref["actions_during_stream"][0]["t_s"]
    assert ref_end - 0.5 < ended < ref_end + 1.0
