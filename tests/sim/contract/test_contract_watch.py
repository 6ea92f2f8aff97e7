"""Contract tests for lists and watches (reference files 025-072): the simulator is built into
the state each exchange needs, the request is replayed, and the answer is held to the real
kube-apiserver 1.28 answer: status, content type, the body's keys in order at every level,
and every value that depends neither on time nor on uids nor on resourceVersions. Watches
also compare the sequence of event types, each line's object and how the stream ends."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .test_contract import assert_same_status, ctype, load

# values that differ from run to run: replaced before comparing
VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "time", "continue", "ca.crt"}
CURL = "curl/7.88.1"


def scrub(value: Any) -> Any:
    """``value`` with time, uid, resourceVersion (and continue token) values masked; keys and
    their order kept, so comparing ``json.dumps`` output also compares key order."""
    if isinstance(value, dict):
        return {k: ("<v>" if k in VOLATILE and v is not None else scrub(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def assert_same_body(got: Any, want: Any) -> None:
    assert json.dumps(scrub(got)) == json.dumps(scrub(want))


def token_of(token: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return data


async def call(srv: ApiServer, session: aiohttp.ClientSession, ref: dict[str, Any],
               path: str | None = None, query: str | None = None,
               body: Any = None) -> tuple[int, Any, Any, list[float]]:
    """Send ``ref``'s request as curl did (its User-Agent, Accept and Content-Type) ->
    (status, body or the list of watch lines, headers, seconds at which each line came)."""
    r = ref["request"]
    headers = {k: v for k, v in r["headers"].items()
               if k.lower() in ("content-type", "accept", "user-agent")}
    user = r["user"].split()[0]
    if user != "anonymous":
        headers["Authorization"] = f"Bearer {srv.token(user)}"
    body = r.get("body") if body is None else body
    data = None if body is None else json.dumps(body).encode()
    query = r["raw_query"] if query is None else query
    url = srv.url + (path or r["path"]) + (f"?{query}" if query else "")
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with session.request(r["method"], url, data=data, headers=headers) as resp:
        want = {k.lower(): v for k, v in ref["response"]["headers"].items()}
        assert resp.headers.get("Cache-Control") == want.get("cache-control")
        assert ("X-Content-Type-Options" in resp.headers) == ("x-content-type-options" in want)
        streaming = resp.headers.get("Transfer-Encoding") == "chunked" and resp.status == 200 \
            and "Content-Length" not in resp.headers and ("watch" in url)
        if streaming:
            lines: list[Any] = []
            arrival: list[float] = []
            async for raw in resp.content:
                if raw.strip():
                    lines.append(json.loads(raw))
                    arrival.append(loop.time() - start)
            arrival.append(loop.time() - start)  # the end of the stream
            return resp.status, lines, resp.headers, arrival
        text = await resp.text()
        parsed: Any = json.loads(text) if ctype(resp.headers) == "application/json" else text
        return resp.status, parsed, resp.headers, []


Session = aiohttp.ClientSession


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    async with aiohttp.ClientSession() as s:
        yield s


# ---- lists (025-050) ------------------------------------------------------------------------


def cm_body(i: int) -> dict[str, Any]:
    """The body curl POSTed for cm-i (026 shows cm-1; the others differ in name/label/data)."""
    body: dict[str, Any] = json.loads(json.dumps(load(26)["request"]["body"]))
    body["metadata"] = {"name": f"cm-{i}", "labels": {"a": "1" if i < 4 else "2"}}
    body["data"] = {"k": f"v{i}"}
    return body


@pytest.fixture
async def lists(session: Session) -> AsyncIterator[ApiServer]:
    """Run 1's ``lists`` namespace, made as the pack made it: POSTs by curl (025, 026)."""
    async with ApiServer(watch_list=False, too_large_rv_wait=0.1) as srv:
        ref = load(25)
        status, body, headers, _ = await call(srv, session, ref)
        assert status == 201 and ctype(headers) == ctype(ref["response"]["headers"])
        assert_same_body(body, ref["response"]["body"])
        for i in range(1, 6):
            ref = load(26)
            status, body, headers, _ = await call(srv, session, ref, body=cm_body(i))
            assert status == 201 and ctype(headers) == "application/json"
            if i == 1:
                assert_same_body(body, ref["response"]["body"])
        yield srv


async def test_025_026_creates(lists: ApiServer) -> None:
    """The fixture holds 025 and 026; the objects are stored as they were returned."""
    got = lists.get_object("v1", "ConfigMap", "cm-1", namespace="lists")
    want = load(26)["response"]["body"]
    assert_same_body(got, want)


@pytest.mark.parametrize("number", [30, 31, 32, 35, 43, 45])
async def test_plain_lists_match(lists: ApiServer, session: Session, number: int) -> None:
    ref = load(number)
    status, body, headers, _ = await call(lists, session, ref)
    assert status == 200 and ctype(headers) == ctype(ref["response"]["headers"])
    assert_same_body(body, ref["response"]["body"])
    assert body["metadata"]["resourceVersion"] == str(lists.store.rv)


async def test_044_partial_object_metadata_get(lists: ApiServer, session: Session) -> None:
    ref = load(44)
    status, body, headers, _ = await call(lists, session, ref)
    assert status == 200 and ctype(headers) == ctype(ref["response"]["headers"])
    assert_same_body(body, ref["response"]["body"])


@pytest.mark.parametrize("number", [37, 38])
async def test_037_038_lists_at_a_given_rv(lists: ApiServer, session: Session,
                                           number: int) -> None:
    """At the current RV both answer at it (as in the pack). Once writes elsewhere moved the
    RV on, Exact still answers at the requested (not compacted) RV, NotOlderThan from the
    cache at the latest."""
    ref = load(number)
    rv = lists.store.rv
    query = ref["request"]["raw_query"].replace("242", str(rv))
    status, body, _, _ = await call(lists, session, ref, query=query)
    assert status == 200
    assert_same_body(body, ref["response"]["body"])
    assert body["metadata"]["resourceVersion"] == str(rv)
    lists.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "x1", "namespace": "default"}}, manager="curl")
    status, body, _, _ = await call(lists, session, ref, query=query)
    assert status == 200
    assert_same_body(body, ref["response"]["body"])
    served = rv if number == 37 else lists.store.rv
    assert body["metadata"]["resourceVersion"] == str(served) and lists.store.rv > rv


async def test_028_029_pages(lists: ApiServer, session: Session) -> None:
    status, page1, _, _ = await call(lists, session, load(27))
    assert status == 200
    rv = lists.store.rv
    token = page1["metadata"]["continue"]
    for number in (28, 29):
        ref = load(number)
        status, body, _, _ = await call(lists, session, ref, query=f"limit=2&continue={token}")
        assert status == 200
        assert_same_body(body, ref["response"]["body"])
        assert body["metadata"]["resourceVersion"] == str(rv)  # page 1's RV, every page
        if number == 28:
            want = token_of(ref["response"]["body"]["metadata"]["continue"])
            token = body["metadata"]["continue"]
            got = token_of(token)
            assert list(got) == list(want) and got["v"] == want["v"]
            assert got["start"] == want["start"] and got["rv"] == rv


async def test_049_continue_after_410_is_inconsistent(lists: ApiServer, session: Session) -> None:
    status, page1, _, _ = await call(lists, session, load(27))
    token = page1["metadata"]["continue"]
    other = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "elsewhere", "namespace": "default"}}
    lists.create_object(other, manager="curl")
    lists.compact()
    ref48 = load(48)
    status, gone, headers, _ = await call(lists, session, ref48, query=f"limit=2&continue={token}")
    assert_same_status(ref48, status, gone, headers)
    fresh = gone["metadata"]["continue"]
    assert token_of(fresh)["rv"] == token_of(ref48["response"]["body"]["metadata"]["continue"])[
        "rv"] == -1
    ref = load(49)
    assert ref["request"]["raw_query"].endswith(ref48["response"]["body"]["metadata"]["continue"])
    status, body, _, _ = await call(lists, session, ref, query=f"limit=2&continue={fresh}")
    assert status == 200
    assert_same_body(body, ref["response"]["body"])
    latest = lists.store.rv
    assert body["metadata"]["resourceVersion"] == str(latest)  # not page 1's RV
    assert token_of(body["metadata"]["continue"])["rv"] == latest


async def test_050_old_rv_without_match_is_served_at_latest(lists: ApiServer,
                                                            session: Session) -> None:
    old = lists.store.rv
    for name in ("x1", "x2"):  # writes elsewhere move the RV on (242 -> 244 in the pack)
        lists.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": name, "namespace": "default"}}, manager="curl")
    ref = load(50)
    status, body, _, _ = await call(lists, session, ref, query=f"resourceVersion={old}")
    assert status == 200
    assert_same_body(body, ref["response"]["body"])
    assert body["metadata"]["resourceVersion"] == str(lists.store.rv) != str(old)


# ---- watches (052-072) ----------------------------------------------------------------------

Lines = list[dict[str, Any]]


def types(lines: Lines) -> list[str]:
    return [x["type"] for x in lines]


def by_name(lines: Lines) -> dict[str, Any]:
    return {x["object"]["metadata"]["name"]: x for x in lines if x["type"] != "BOOKMARK"}


def assert_same_lines(got: Lines, want: Lines) -> None:
    assert types(got) == types(want)
    for g, w in zip(got, want, strict=True):
        assert_same_body(g, w)


def assert_bookmark(line: dict[str, Any], want: dict[str, Any], rv: int | None = None) -> None:
    """Bookmarks: only kind, apiVersion and metadata {resourceVersion, creationTimestamp: null,
    [annotations]} (the end-of-initial-events one names it)."""
    assert line["type"] == "BOOKMARK"
    assert json.dumps(scrub(line)) == json.dumps(scrub(want))
    assert line["object"]["metadata"]["creationTimestamp"] is None
    if rv is not None:
        assert line["object"]["metadata"]["resourceVersion"] == str(rv)


def assert_clean_end(ref: dict[str, Any], arrival: list[float], timeout: float) -> None:
    """The server ended the chunked body itself at timeoutSeconds (not earlier)."""
    assert ref["response"]["stream_end"].startswith("server ended the response cleanly")
    assert timeout - 0.05 <= arrival[-1] < timeout + 1.0


def ex(n: int, a: str, k: str = "") -> dict[str, Any]:
    """One of run 1's ``watch`` objects (existing-1 a=1, existing-2 a=2)."""
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": f"existing-{n}", "namespace": "watch",
                                        "labels": {"a": a}},
                           "data": {"k": k or str(n)}}
    return obj


LATE = "1796221108.3488016"  # existing-1/2's data.k from 059 on


async def watch_world(watch_list: bool, late: str = "", root_ca: bool = False,
                      **knobs: Any) -> ApiServer:
    srv = ApiServer(watch_list=watch_list, root_ca_configmaps=root_ca, **knobs)
    await srv.start()
    srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watch"}},
                      manager="curl")
    for n, a in ((1, "1"), (2, "2")):
        srv.create_object(ex(n, a), manager="curl")
    if late:
        for n in (1, 2):
            obj = srv.get_object("v1", "ConfigMap", f"existing-{n}", namespace="watch")
            obj["data"] = {"k": late}
            srv.update_object(obj, manager="curl")
    return srv


Act = Callable[[ApiServer], Awaitable[None]]


async def watch(srv: ApiServer, session: Session, ref: dict[str, Any], query: str,
                actions: Act | None = None, path: str | None = None
                ) -> tuple[int, Any, Any, list[float]]:
    task = None if actions is None else asyncio.create_task(actions(srv))
    try:
        return await call(srv, session, ref, path=path, query=query)
    finally:
        if task is not None:
            await task


def timeout_to(ref: dict[str, Any], seconds: float, **replace: str) -> str:
    """``ref``'s query with a shorter timeoutSeconds (and other values replaced)."""
    parts = []
    for part in ref["request"]["raw_query"].split("&"):
        key = part.split("=")[0]
        if key == "timeoutSeconds":
            part = f"timeoutSeconds={seconds}"
        elif key in replace:
            part = f"{key}={replace[key]}"
        parts.append(part)
    return "&".join(parts)


async def w2_cycle(srv: ApiServer) -> None:
    """052's actions: POST w2, PUT data.k=v2, DELETE (curl)."""
    await asyncio.sleep(0.05)
    obj = srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "w2", "namespace": "watch"},
                             "data": {"k": "v"}}, manager="curl")
    obj["data"] = {"k": "v2"}
    srv.update_object(obj, manager="curl")
    srv.delete_object("v1", "ConfigMap", "w2", namespace="watch")


async def test_052_watch_events_then_one_bookmark_then_clean_end(session: Session) -> None:
    """052 was sent over HTTP/2 (no Transfer-Encoding there); the simulator speaks HTTP/1.1,
    so the same watch is held over HTTP/1.1: the same lines, in the same order."""
    ref = load(52)
    srv = await watch_world(False, bookmark_interval=60.0, bookmark_lead=0.4)
    try:
        rv = srv.store.rv
        status, lines, headers, arrival = await watch(
            srv, session, ref, timeout_to(ref, 0.8, resourceVersion=str(rv)), w2_cycle)
    finally:
        await srv.stop()
    assert status == 200 and ctype(headers) == ref["response"]["headers"]["content-type"]
    want = ref["response"]["lines"]
    assert_same_lines(lines[:3], want[:3])
    assert types(lines) == types(want)
    assert_bookmark(lines[-1], want[-1], rv=srv.store.rv)
    assert arrival[-2] < 0.8 and arrival[-2] > 0.3  # the bookmark comes before the deadline
    assert_clean_end(ref, arrival, 0.8)


async def replay_actions(srv: ApiServer, want: Lines) -> None:
    """Make the writes that produced ``want``'s lines (create / update / delete by name)."""
    for line in want:
        obj = line["object"]
        meta = obj["metadata"]
        name = meta["name"]
        if line["type"] == "ADDED":
            new: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name, "namespace": "watch"}}
            if "labels" in meta:
                new["metadata"]["labels"] = meta["labels"]
            if "data" in obj:
                new["data"] = obj["data"]
            srv.create_object(new, manager="curl")
        elif line["type"] == "MODIFIED":
            cur = srv.get_object("v1", "ConfigMap", name, namespace="watch")
            if "labels" in meta:
                cur["metadata"]["labels"] = meta["labels"]
            if "data" in obj:
                cur["data"] = obj["data"]
            srv.update_object(cur, manager="curl")
        else:
            srv.delete_object("v1", "ConfigMap", name, namespace="watch")


async def test_053_rv_1_on_a_fresh_cluster_replays_everything(session: Session) -> None:
    """The pack's client cut this watch after 10 s (no timeoutSeconds); here it ends at 0.5 s."""
    ref = load(53)
    want = ref["response"]["lines"]
    srv = ApiServer(watch_list=False)
    await srv.start()
    try:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "watch"}}, manager="curl")
        await replay_actions(srv, want)
        status, lines, _, _ = await call(srv, session, ref, query="watch=1&resourceVersion=1"
                                         "&timeoutSeconds=0.5")
    finally:
        await srv.stop()
    assert status == 200
    assert len(want) == 30
    assert_same_lines(lines, want)
    assert [int(x["object"]["metadata"]["resourceVersion"]) for x in lines] == sorted(
        int(x["object"]["metadata"]["resourceVersion"]) for x in lines)


@pytest.mark.parametrize("number", [54, 55, 63])
async def test_054_055_063_initial_added_events(session: Session, number: int) -> None:
    """RV=0 (watch cache), no RV (etcd) and the deprecated /watch/ path: ADDED for each
    existing object, then nothing, then the server ends the stream at timeoutSeconds. (054's
    cache order is not key order; the simulator sends key order, so 054 compares by name.)"""
    ref = load(number)
    srv = await watch_world(False, late=LATE if number == 63 else "changed")
    try:
        status, lines, headers, arrival = await watch(srv, session, ref, timeout_to(ref, 0.3))
    finally:
        await srv.stop()
    want = ref["response"]["lines"]
    assert status == 200 and ctype(headers) == "application/json"
    assert headers["Transfer-Encoding"] == ref["response"]["headers"]["Transfer-Encoding"]
    if number == 54:
        assert types(lines) == types(want)
        got, exp = by_name(lines), by_name(want)
        assert list(got) == sorted(exp)
        for name in exp:
            assert_same_body(got[name], exp[name])
    else:
        assert_same_lines(lines, want)
    assert_clean_end(ref, arrival, 0.3)


async def test_064_deprecated_single_object_watch(session: Session) -> None:
    ref = load(64)
    srv = await watch_world(False, late=LATE)
    try:
        status, lines, _, arrival = await watch(srv, session, ref, timeout_to(ref, 0.3))
    finally:
        await srv.stop()
    assert status == 200
    assert_same_lines(lines, ref["response"]["lines"])
    assert_clean_end(ref, arrival, 0.3)


async def test_056_forbidden_watch(session: Session) -> None:
    ref = load(56)
    srv = await watch_world(False)
    try:
        status, body, headers, _ = await call(srv, session, ref)
    finally:
        await srv.stop()
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]
    assert "Transfer-Encoding" not in headers  # a plain response, no stream


@pytest.mark.parametrize("number", [74, 76, 77, 78, 79, 80])
async def test_authorization_403s_say_nosniff(session: Session, number: int) -> None:
    """Like 056: every 403 from the authorization filter carries X-Content-Type-Options
    (``call`` compares it), whatever the verb and scope."""
    ref = load(number)
    async with ApiServer() as srv:
        status, body, headers, _ = await call(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    assert headers["X-Content-Type-Options"] == "nosniff"


async def selector_moves(srv: ApiServer) -> None:
    """058's actions: POST sel-1 a=1, PATCH a=2 (leaves), PATCH a=1 (re-enters), DELETE."""
    await asyncio.sleep(0.05)
    obj = srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "sel-1", "namespace": "watch",
                                          "labels": {"a": "1"}}}, manager="curl")
    for a in ("2", "1"):
        await asyncio.sleep(0.02)
        obj["metadata"]["labels"] = {"a": a}
        obj = srv.update_object(obj, manager="curl")
    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",  # 305 in the pack
                       "metadata": {"name": "other", "namespace": "default"}})
    srv.delete_object("v1", "ConfigMap", "sel-1", namespace="watch")


async def test_058_label_selector_transitions(session: Session) -> None:
    ref = load(58)
    srv = await watch_world(False)
    try:
        rv = srv.store.rv
        status, lines, _, arrival = await watch(
            srv, session, ref, timeout_to(ref, 0.5, resourceVersion=str(rv)), selector_moves)
    finally:
        await srv.stop()
    want = ref["response"]["lines"]
    assert status == 200
    assert_same_lines(lines, want)
    # the DELETED for leaving the selector is the old object (a=1) at the new RV
    rvs = [int(x["object"]["metadata"]["resourceVersion"]) for x in lines]
    wrvs = [int(x["object"]["metadata"]["resourceVersion"]) for x in want]
    assert [r - rvs[0] for r in rvs] == [r - wrvs[0] for r in wrvs]
    assert_clean_end(ref, arrival, 0.5)


async def touch_both(srv: ApiServer) -> None:
    """059's actions: merge-patch existing-1's data.k, then existing-2's (not selected)."""
    await asyncio.sleep(0.05)
    for n in (1, 2):
        obj = srv.get_object("v1", "ConfigMap", f"existing-{n}", namespace="watch")
        obj["data"] = {"k": LATE}
        srv.update_object(obj, manager="curl")


async def test_059_single_object_field_selector(session: Session) -> None:
    ref = load(59)
    srv = await watch_world(False, late="changed")
    try:
        rv = srv.store.rv
        status, lines, _, arrival = await watch(
            srv, session, ref, timeout_to(ref, 0.4, resourceVersion=str(rv)), touch_both)
    finally:
        await srv.stop()
    assert status == 200
    assert_same_lines(lines, ref["response"]["lines"])
    assert_clean_end(ref, arrival, 0.4)


async def test_061_watch_param_on_object_path_is_a_get(session: Session) -> None:
    ref = load(61)
    srv = await watch_world(False, late=LATE)
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        status, body, headers, _ = await call(srv, session, ref)
        took = loop.time() - start
    finally:
        await srv.stop()
    assert status == 200 and ctype(headers) == "application/json"
    assert "Content-Length" in headers  # a plain answer, not a chunked stream
    assert took < 1.0  # not held open for timeoutSeconds=2
    assert_same_body(body, ref["response"]["body"])


@pytest.mark.parametrize("number", [66, 67, 71])
async def test_066_067_071_streaming_lists(session: Session, number: int) -> None:
    """WatchList gate on (run 2, with the controller manager's kube-root-ca.crt): initial
    ADDED events (watch cache order, compared by name), then the k8s.io/initial-events-end
    bookmark if bookmarks were allowed (066 at the requested RV, 071: an RV=0 watch is
    defaulted to sendInitialEvents=true, so it gets one too), and nothing else."""
    ref = load(number)
    srv = await watch_world(True, late=LATE, root_ca=True, bookmark_interval=60.0,
                            bookmark_lead=0.4, initial_events_end_delay=0.15)
    try:
        rv = srv.store.rv
        query = timeout_to(ref, 0.4, resourceVersion=str(rv) if number == 66 else "0")
        if number == 67:
            query = timeout_to(ref, 0.4)
        status, lines, _, arrival = await watch(srv, session, ref, query)
    finally:
        await srv.stop()
    want = ref["response"]["lines"]
    assert status == 200
    assert types(lines) == types(want)
    got, exp = by_name(lines), by_name(want)
    assert sorted(got) == sorted(exp)
    for name in exp:
        assert_same_body(got[name], exp[name])
    if want[-1]["type"] == "BOOKMARK":
        assert_bookmark(lines[-1], want[-1], rv=rv)
        # not at once: on the next bookmark tick (0.52 s / 0.15 s after the ADDED lines)
        wait = ref["response"]["line_arrival_s"][-1] - ref["response"]["line_arrival_s"][-2]
        assert wait > 0.1 and arrival[-2] - arrival[-3] >= 0.1
    assert_clean_end(ref, arrival, 0.4)


async def live_events(srv: ApiServer) -> None:
    """065's actions, sooner: POST live-1, DELETE live-1."""
    await asyncio.sleep(0.05)
    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "live-1", "namespace": "watch"}}, manager="curl")
    await asyncio.sleep(0.05)
    srv.delete_object("v1", "ConfigMap", "live-1", namespace="watch")


async def test_065_end_marker_comes_after_live_events(session: Session) -> None:
    """With a bookmark tick as the apiserver has, live events made before the tick come
    before the initial-events-end bookmark, and it carries the RV they reached; then the
    pre-deadline bookmark (without the annotation) and the clean end."""
    ref = load(65)
    srv = await watch_world(True, late=LATE, root_ca=True, bookmark_interval=60.0,
                            bookmark_lead=0.3, initial_events_end_delay=0.25)
    try:
        status, lines, _, arrival = await watch(srv, session, ref, timeout_to(ref, 0.6),
                                                live_events)
    finally:
        await srv.stop()
    want = ref["response"]["lines"]
    assert status == 200
    assert types(lines) == types(want)
    assert [x["object"]["metadata"].get("name") for x in lines[3:5]] == ["live-1"] * 2
    assert_same_body(lines[3], want[3])
    assert_same_body(lines[4], want[4])
    assert_bookmark(lines[5], want[5], rv=int(lines[4]["object"]["metadata"]["resourceVersion"]))
    assert_bookmark(lines[6], want[6], rv=srv.store.rv)
    assert_clean_end(ref, arrival, 0.6)


async def test_069_send_initial_events_false(session: Session) -> None:
    """No initial events, and with timeoutSeconds no longer than the 2 s bookmark lead, no
    pre-deadline bookmark either: an empty stream that the server ends at the deadline."""
    ref = load(69)
    srv = await watch_world(True, late=LATE, root_ca=True, bookmark_interval=60.0,
                            bookmark_lead=0.4)
    try:
        rv = srv.store.rv
        status, lines, headers, arrival = await watch(
            srv, session, ref, timeout_to(ref, 0.4, resourceVersion=str(rv)))
    finally:
        await srv.stop()
    assert status == 200 and headers["Transfer-Encoding"] == "chunked"
    assert lines == ref["response"]["lines"] == []
    assert_clean_end(ref, arrival, 0.4)


async def test_072_rv0_with_bookmarks_gate_off(session: Session) -> None:
    """Gate off: initial ADDED events and no end-of-initial-events bookmark; only the
    pre-deadline bookmark(s) (two in the pack, on the real server's 1 s timer; the simulator
    sends the one at the lead, so the sequence is compared with bookmark runs collapsed)."""
    ref = load(72)
    srv = await watch_world(False, late=LATE, root_ca=True, bookmark_interval=60.0,
                            bookmark_lead=0.4)
    try:
        status, lines, _, arrival = await watch(srv, session, ref, timeout_to(ref, 0.7))
    finally:
        await srv.stop()
    want = ref["response"]["lines"]
    assert status == 200

    def collapsed(seq: list[str]) -> list[str]:
        return [t for i, t in enumerate(seq) if i == 0 or t != "BOOKMARK" or seq[i - 1] != t]

    assert collapsed(types(lines)) == collapsed(types(want)) == ["ADDED"] * 3 + ["BOOKMARK"]
    got, exp = by_name(lines), by_name(want)
    assert sorted(got) == sorted(exp)
    for name in exp:
        assert_same_body(got[name], exp[name])
    for line in lines[3:]:
        assert_bookmark(line, want[-1], rv=srv.store.rv)
    assert_clean_end(ref, arrival, 0.7)
