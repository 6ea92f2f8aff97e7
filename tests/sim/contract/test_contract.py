"""Contract tests: replay requests from the real kube-apiserver 1.28 reference pack against
the simulator and hold its answers to them (status, content type, Status shape, reason,
message wording with numbers and uids normalised, watch line shapes)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .._util import cm

REF = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"  # in the repo


def load(number: int) -> dict[str, Any]:
    (path,) = REF.glob(f"{number:03d}-*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def norm(text: str) -> str:
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UID", text)
    return re.sub(r"\d+", "N", text)


def ctype(headers: Any) -> str:
    return str(headers.get("Content-Type", "")).split(";")[0]


async def replay(srv: ApiServer, session: aiohttp.ClientSession, ref: dict[str, Any],
                 **override: Any) -> tuple[int, Any, Any]:
    r = ref["request"]
    headers = {k: v for k, v in r["headers"].items() if k.lower() in ("content-type", "accept")}
    user = r["user"]
    if user.startswith("admin"):
        headers["Authorization"] = f"Bearer {srv.token('admin')}"
    elif user.startswith("limited"):
        headers["Authorization"] = f"Bearer {srv.token('limited')}"
    elif user.startswith("nobody"):
        headers["Authorization"] = "Bearer this-is-not-a-valid-token"
    body = override.get("body", r.get("body"))
    data = None if body is None else (body.encode() if isinstance(body, str)
                                      else json.dumps(body).encode())
    query = override.get("raw_query", r.get("raw_query") or "")
    url = srv.url + r["path"] + (f"?{query}" if query else "")
    async with session.request(r["method"], url, data=data, headers=headers) as resp:
        text = await resp.text()
        parsed: Any = text
        if ctype(resp.headers) == "application/json" and text:
            if "watch" in query and resp.status == 200:
                parsed = [json.loads(line) for line in text.splitlines() if line]
            else:
                parsed = json.loads(text)
        return resp.status, parsed, resp.headers


def assert_same_status(ref: dict[str, Any], status: int, body: Any, headers: Any,
                       exact: bool = True) -> None:
    want = ref["response"]
    assert status == want["status"]
    assert ctype(headers) == ctype(want["headers"])
    wbody = want["body"]
    if not isinstance(wbody, dict):
        assert body == wbody
        return
    assert set(body) == set(wbody), (body, wbody)
    assert body.get("reason") == wbody.get("reason")
    assert body.get("code") == wbody.get("code")
    assert set(body.get("details") or {}) == set(wbody.get("details") or {})
    if exact:
        assert norm(body.get("message", "")) == norm(wbody.get("message", ""))


@pytest.fixture
async def world() -> Any:
    """A simulator with the reference pack's namespaces and objects."""
    async with ApiServer(too_large_rv_wait=0.1, bookmark_interval=0.2,
                         bookmark_lead=0.1) as srv, aiohttp.ClientSession() as session:
        for ns in ("errors", "lists", "watch", "fin"):
            srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns}})
        target = cm("target", ns="errors", a="1", b="2")
        target["metadata"]["labels"] = {"app": "x"}
        srv.create_object(target)
        for i in range(1, 6):
            srv.create_object(cm(f"cm-{i}", ns="lists", labels={"a": "1" if i < 4 else "2"},
                                 k=f"v{i}"))
        yield srv, session


SIMPLE = [33, 34, 39, 40, 41, 57, 60, 68, 70, 73, 74, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85,
          86, 87, 88, 89, 90, 92, 93, 94, 95, 96, 100, 101, 102, 107, 108, 109, 110, 120]


@pytest.mark.parametrize("number", SIMPLE)
async def test_error_answers_match(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    if number == 57:
        async with ApiServer(watch_list=False) as off:
            status, body, headers = await replay(off, session, ref)
    else:
        status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)


async def test_042_continue_with_rv_and_048_expired_continue(world: Any) -> None:
    srv, session = world
    status, page, _ = await replay(srv, session, load(27))
    token = page["metadata"]["continue"]
    assert status == 200 and page["metadata"]["remainingItemCount"] == 3
    ref = load(42)
    status, body, headers = await replay(
        srv, session, ref, raw_query=f"limit=2&continue={token}&resourceVersion=1")
    assert_same_status(ref, status, body, headers)
    srv.create_object(cm("later", ns="lists"))
    srv.compact()
    ref = load(48)
    status, body, headers = await replay(srv, session, ref, raw_query=f"limit=2&continue={token}")
    assert_same_status(ref, status, body, headers)
    assert set(body["metadata"]) == {"continue"}


async def test_046_too_large_and_047_exact_compacted(world: Any) -> None:
    srv, session = world
    ref = load(46)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert headers["Retry-After"] == ref["response"]["headers"]["Retry-After"]
    assert body["details"] == ref["response"]["body"]["details"]
    rv = srv.store.rv
    srv.create_object(cm("x", ns="lists"))
    srv.compact()
    ref = load(47)
    status, body, headers = await replay(srv, session, ref,
                                         raw_query=f"resourceVersion={rv}&resourceVersionMatch=Exact")
    assert_same_status(ref, status, body, headers)


async def test_036_rv0_ignores_limit(world: Any) -> None:
    srv, session = world
    ref = load(36)
    status, body, _ = await replay(srv, session, ref)
    assert status == 200 and len(body["items"]) == len(ref["response"]["body"]["items"])
    assert set(body["metadata"]) == set(ref["response"]["body"]["metadata"])


async def test_list_item_shape_matches(world: Any) -> None:
    srv, session = world
    ref = load(27)
    status, body, _ = await replay(srv, session, ref)
    want = ref["response"]["body"]
    assert status == 200
    assert set(body) == set(want) and set(body["metadata"]) == set(want["metadata"])
    got_item, want_item = body["items"][0], want["items"][0]
    assert list(got_item) == list(want_item)
    assert list(got_item["metadata"]) == list(want_item["metadata"])
    assert got_item["metadata"]["managedFields"][0]["fieldsV1"] == (
        want_item["metadata"]["managedFields"][0]["fieldsV1"])
    assert [i["metadata"]["name"] for i in body["items"]] == ["cm-1", "cm-2"]


async def test_062_too_old_watch_line(world: Any) -> None:
    srv, session = world
    srv.create_object(cm("x", ns="watch"))
    srv.compact()
    ref = load(62)
    status, lines, headers = await replay(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    want = ref["response"]["lines"]
    assert len(lines) == len(want) == 1
    assert set(lines[0]) == set(want[0]) and lines[0]["type"] == "ERROR"
    assert set(lines[0]["object"]) == set(want[0]["object"])
    assert norm(lines[0]["object"]["message"]) == norm(want[0]["object"]["message"])


async def test_051_watch_line_shapes(world: Any) -> None:
    srv, session = world
    ref = load(51)
    rv = srv.store.rv

    async def actions() -> None:
        await asyncio.sleep(0.1)
        obj = srv.create_object(cm("w1", ns="watch"))
        obj["data"] = {"k": "v2"}
        srv.update_object(obj)
        srv.delete_object("v1", "ConfigMap", "w1", namespace="watch")

    task = asyncio.create_task(actions())
    status, lines, headers = await replay(
        srv, session, ref, raw_query=f"watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                                     "&timeoutSeconds=1")
    await task
    want = ref["response"]["lines"]
    assert status == 200 and headers.get("Transfer-Encoding") == "chunked"
    assert [x["type"] for x in lines[:3]] == [x["type"] for x in want[:3]]
    for got, exp in zip(lines[:3], want[:3], strict=True):
        assert list(got["object"]) == list(exp["object"])
        assert set(got["object"]["metadata"]) == set(exp["object"]["metadata"])
    bookmarks = [x for x in lines if x["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[-1]["object"].keys() == want[-1]["object"].keys()
    assert bookmarks[-1]["object"]["metadata"].keys() == want[-1]["object"]["metadata"].keys()


async def test_065_streaming_list_end_marker(world: Any) -> None:
    srv, session = world
    srv.create_object(cm("existing-1", ns="watch"))
    ref = load(65)
    status, lines, _ = await replay(srv, session, ref, raw_query=ref["request"]["raw_query"]
                                    .replace("timeoutSeconds=4", "timeoutSeconds=0.3"))
    assert status == 200
    end = next(x for x in lines if x["type"] == "BOOKMARK")
    want_end = next(x for x in ref["response"]["lines"] if x["type"] == "BOOKMARK")
    assert lines[0]["type"] == "ADDED"
    assert end["object"]["metadata"].keys() == want_end["object"]["metadata"].keys()
    assert end["object"]["metadata"]["annotations"] == want_end["object"]["metadata"][
        "annotations"]


async def test_104_apply_conflict(world: Any) -> None:
    srv, session = world
    status, body, _ = await replay(srv, session, load(103))
    assert status == 201
    assert body["metadata"]["managedFields"][0]["fieldsV1"] == load(103)["response"]["body"][
        "metadata"]["managedFields"][0]["fieldsV1"]
    ref = load(104)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]
    status, body, _ = await replay(srv, session, load(105))
    assert status == 200 and body["data"] == load(105)["response"]["body"]["data"]


async def test_119_delete_status(world: Any) -> None:
    srv, session = world
    srv.create_object(cm("ssa-made", ns="errors"))
    ref = load(119)
    status, body, _ = await replay(srv, session, ref)
    want = ref["response"]["body"]
    assert status == 200 and set(body) == set(want) and set(body["details"]) == set(
        want["details"])


async def test_145_and_155_custom_resources(world: Any) -> None:
    srv, session = world
    status, _, _ = await replay(srv, session, load(136))
    assert status == 201
    status, _, _ = await replay(srv, session, load(140))
    assert status == 201
    ref = load(145)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    for number in (151, 152):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert_same_status(ref, status, body, headers)
    status, body, _ = await replay(srv, session, load(153))
    assert status == 200 and body["metadata"]["finalizers"] == load(153)["response"]["body"][
        "metadata"]["finalizers"]
    ref = load(155)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)


async def test_157_to_162_finalizers(world: Any) -> None:
    srv, session = world
    status, _, _ = await replay(srv, session, load(156))
    assert status == 201
    ref = load(157)
    status, body, _ = await replay(srv, session, ref)
    assert status == 200 and list(body["metadata"]) == list(ref["response"]["body"]["metadata"])
    ref = load(159)
    status, body, _ = await replay(srv, session, ref)
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0] == ref["response"]["body"]["details"]["causes"][0]
    ref = load(162)
    status, body, _ = await replay(srv, session, ref)
    assert status == 200 and "finalizers" not in body["metadata"]
    status, _, _ = await replay(srv, session, load(163))
    assert status == 404


async def test_174_throttle_body(world: Any) -> None:
    srv, session = world
    srv.faults.throttle(retry_after=10)
    ref = load(174)
    status, body, headers = await replay(srv, session, ref, raw_query="limit=1")
    assert status == 429 and body == ref["response"]["body"]
    assert headers["Content-Type"] == ref["response"]["headers"]["Content-Type"]
    assert headers["Retry-After"] == "10"


# ---- field validation, dry run, generateName, 422 causes (090-092, 112-118, 147-149) ---------


def warnings(headers: Any) -> list[str]:
    return list(headers.getall("Warning", []))


def ref_warnings(ref: dict[str, Any]) -> list[str]:
    value = ref["response"]["headers"].get("Warning", [])
    return [value] if isinstance(value, str) else list(value)


async def test_090_091_all_causes_in_one_422(world: Any) -> None:
    srv, session = world
    for number in (90, 91):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert_same_status(ref, status, body, headers)
        assert body["details"] == ref["response"]["body"]["details"]


async def test_112_unknown_fields_dropped_with_warnings(world: Any) -> None:
    srv, session = world
    ref = load(112)
    want = ref["response"]["body"]
    status, body, headers = await replay(srv, session, ref)
    assert status == 201 and ctype(headers) == "application/json"
    assert warnings(headers) == ref_warnings(ref)
    assert set(body) == set(want) and body["data"] == want["data"]
    assert set(body["metadata"]) == set(want["metadata"])
    assert body["metadata"]["managedFields"][0]["fieldsV1"] == \
        want["metadata"]["managedFields"][0]["fieldsV1"]
    stored = srv.get_object("v1", "ConfigMap", "unknown-field", namespace="errors")
    assert "spec" not in stored and "bogus" not in stored["metadata"]


async def test_113_114_strict_rejects_unknown_and_duplicate_fields(world: Any) -> None:
    srv, session = world
    for number in (113, 114):
        ref = load(number)
        status, body, headers = await replay(srv, session, ref)
        assert_same_status(ref, status, body, headers)
        assert warnings(headers) == []
    for name in ("unknown-field-strict", "dup", "dup2"):
        with pytest.raises(Exception, match="not found"):
            srv.get_object("v1", "ConfigMap", name, namespace="errors")


async def test_115_duplicate_field_ignored_last_wins(world: Any) -> None:
    srv, session = world
    ref = load(115)
    status, body, headers = await replay(srv, session, ref)
    assert status == 201 and warnings(headers) == []
    assert body["metadata"]["name"] == ref["response"]["body"]["metadata"]["name"] == "dup2"
    # the same body under the default (Warn): created, and the duplicate is reported
    status, body, headers = await replay(srv, session, ref, raw_query="",
                                         body=ref["request"]["body"].replace("dup2", "dup3"))
    assert status == 201 and body["metadata"]["name"] == "dup3"
    assert warnings(headers) == ['299 - "duplicate field \\"metadata.name\\""']


async def test_116_117_dry_run_creates_nothing(world: Any) -> None:
    srv, session = world
    ref = load(116)
    want = ref["response"]["body"]
    status, body, headers = await replay(srv, session, ref)
    assert status == 201 and ctype(headers) == "application/json"
    assert set(body["metadata"]) == set(want["metadata"])  # uid and time, no resourceVersion
    assert body["data"] == want["data"]
    ref = load(117)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]


async def test_118_generate_name(world: Any) -> None:
    srv, session = world
    ref = load(118)
    want = ref["response"]["body"]
    names = set()
    for _ in range(3):
        status, body, headers = await replay(srv, session, ref)
        assert status == 201 and ctype(headers) == "application/json"
        assert set(body) == set(want) and set(body["metadata"]) == set(want["metadata"])
        assert re.fullmatch(r"gen-[bcdfghjklmnpqrstvwxz2456789]{5}", body["metadata"]["name"])
        assert body["metadata"]["generateName"] == want["metadata"]["generateName"]
        names.add(body["metadata"]["name"])
    assert len(names) == 3


async def test_147_to_149_custom_resource_schema(world: Any) -> None:
    srv, session = world
    status, _, _ = await replay(srv, session, load(136))
    assert status == 201
    ref = load(147)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]
    ref = load(148)
    want = ref["response"]["body"]
    status, body, headers = await replay(srv, session, ref)
    assert status == 201 and warnings(headers) == ref_warnings(ref)
    assert set(body) == set(want) and body["spec"] == want["spec"]
    assert set(body["metadata"]) == set(want["metadata"])
    ref = load(149)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
