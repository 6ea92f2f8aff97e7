"""Contract tests for discovery, OpenAPI, Table and the representations (files 001-021,
124-129, 134): the simulator's answers over HTTP, User-Agent included, held to the real
kube-apiserver 1.28.7 exchanges (status, headers, body shape, and every discovery entry the
simulator serves described exactly as the real server describes it)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from watchkeeper_sim import ApiServer
from watchkeeper_sim.documents import protobuf as _protobuf
from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.storage.resources import BUILTIN_TYPES

from .test_contract import REF, assert_same_status, ctype, load, norm

CURL = "curl/7.88.1"
HASH = re.compile(r"[0-9A-F]{128}")


def _cm(name: str, manager: str, labels: dict[str, str] | None = None,
        ns: str = "default", **data: str) -> tuple[dict[str, Any], str]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}, manager


@pytest.fixture
async def world() -> AsyncIterator[tuple[ApiServer, aiohttp.ClientSession]]:
    """The objects files 014-016 and 124-128 show, with the same managers."""
    async with ApiServer() as srv, aiohttp.ClientSession() as session:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "errors"}})
        # kubectl-ssa came from `kubectl apply --server-side` (an Apply entry)
        applied = json.dumps(_cm("kubectl-ssa", "", color="blue")[0])
        async with session.patch(
                srv.url + "/api/v1/namespaces/default/configmaps/kubectl-ssa",
                params={"fieldManager": "kubectl"}, data=applied,
                headers={"Content-Type": "application/apply-patch+yaml",
                         "Authorization": f"Bearer {srv.token('admin')}"}) as resp:
            assert resp.status == 201
        for obj, manager in (
            _cm("pre-existing", "curl", {"app": "demo"}, k="v"),
            _cm("kubectl-created", "kubectl-create", k="v"),
            _cm("target", "curl", {"app": "x", "smp": "yes"}, "errors", a="jp", c="3", d="4",
                e="5", unconditional="yes"),
        ):
            srv.create_object(obj, manager=manager)
        yield srv, session


async def send(srv: ApiServer, session: aiohttp.ClientSession, ref: dict[str, Any],
               **override: Any) -> tuple[int, bytes, Any]:
    """Replay ``ref``'s request with its Accept, Content-Type and User-Agent (the agent
    decides pretty printing): (status, raw body, headers)."""
    r = ref["request"]
    headers = {k: v for k, v in r["headers"].items()
               if k.lower() in ("content-type", "accept", "user-agent")}
    headers.update(override.pop("headers", {}))
    if r["user"].startswith("admin"):
        headers["Authorization"] = f"Bearer {srv.token('admin')}"
    body = r.get("body")
    data = None if body is None else (body.encode() if isinstance(body, str)
                                      else json.dumps(body).encode())
    query = override.get("raw_query", r.get("raw_query") or "")
    url = srv.url + override.get("path", r["path"]) + (f"?{query}" if query else "")
    async with session.request(r["method"], url, data=data, headers=headers) as resp:
        return resp.status, await resp.read(), resp.headers


def pretty(raw: bytes) -> None:
    """The body is the apiserver's indented JSON (two spaces, no trailing newline)."""
    assert raw == json.dumps(json.loads(raw), indent=2, ensure_ascii=False).encode()


def compact(raw: bytes) -> None:
    """The body is compact single-line JSON plus a newline (127)."""
    assert raw.endswith(b"}\n") and b"\n" not in raw[:-1] and b'": ' not in raw[:200]


def framing(headers: Any, ref: dict[str, Any]) -> None:
    """Content-Length for short bodies, chunked for long ones, like the reference."""
    want = ref["response"]["headers"]
    assert headers.get("Transfer-Encoding") == want.get("Transfer-Encoding")
    assert ("Content-Length" in headers) == ("Content-Length" in want)


def same_headers(headers: Any, ref: dict[str, Any], *names: str) -> None:
    want = ref["response"]["headers"]
    for name in names:
        assert headers.get(name) == want.get(name), name


# ---- 001-006: /version and legacy discovery ---------------------------------------------


async def test_001_version(world: Any) -> None:
    srv, session = world
    ref = load(1)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    assert json.loads(raw) == ref["response"]["body"]
    assert list(json.loads(raw)) == list(ref["response"]["body"])
    pretty(raw)
    assert headers["Content-Length"] == ref["response"]["headers"]["Content-Length"]
    # /version is always indented (WriteRawJSON), whatever the agent
    status, raw, _ = await send(srv, session, ref, headers={"User-Agent": "kubectl/v1.28.7"})
    pretty(raw)


async def test_002_api_versions(world: Any) -> None:
    srv, session = world
    ref = load(2)
    status, raw, headers = await send(srv, session, ref)
    want = ref["response"]["body"]
    body = json.loads(raw)
    assert status == 200 and ctype(headers) == "application/json"
    assert list(body) == list(want) and body["versions"] == want["versions"]
    assert [list(x) for x in body["serverAddressByClientCIDRs"]] == [
        list(x) for x in want["serverAddressByClientCIDRs"]]
    assert body["serverAddressByClientCIDRs"][0]["serverAddress"] == f"{srv.host}:{srv.port}"
    pretty(raw)
    same_headers(headers, ref, "Cache-Control", "Etag", "Vary")


def _exact(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Same keys in the same order with the same values."""
    assert list(got.items()) == list(want.items())


@pytest.mark.parametrize("number", [3, 11])
async def test_003_011_api_group_list(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    body, want = json.loads(raw), ref["response"]["body"]
    assert status == 200 and headers["Content-Type"] == ref["response"]["headers"]["Content-Type"]
    assert list(body) == list(want)
    real = {g["name"]: g for g in want["groups"]}
    served = [g["name"] for g in body["groups"]]
    assert served == [name for name in real if name in served]  # the real order
    for group in body["groups"]:
        _exact(group, real[group["name"]])
    pretty(raw)
    framing(headers, ref)
    same_headers(headers, ref, "Cache-Control", "Etag", "Vary")


@pytest.mark.parametrize("number", [4, 5])
async def test_004_005_api_resource_lists(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    body, want = json.loads(raw), ref["response"]["body"]
    assert status == 200 and ctype(headers) == "application/json"
    assert list(body) == list(want) and body["groupVersion"] == want["groupVersion"]
    real = {r["name"]: r for r in want["resources"]}
    served = [r["name"] for r in body["resources"]]
    assert served == [name for name in real if name in served]
    for resource in body["resources"]:
        _exact(resource, real[resource["name"]])
    assert {"configmaps", "namespaces", "pods", "secrets"} <= set(served) if number == 4 \
        else {"deployments", "deployments/status"} <= set(served)
    pretty(raw)
    framing(headers, ref)


async def test_006_api_group(world: Any) -> None:
    srv, session = world
    ref = load(6)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and ctype(headers) == "application/json"
    _exact(json.loads(raw), ref["response"]["body"])
    pretty(raw)
    assert headers["Content-Length"] == ref["response"]["headers"]["Content-Length"]


# ---- 007-013: aggregated discovery and the Accept fallbacks -----------------------------


def _aggregated_entries(doc: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for group in doc["items"]:
        for version in group["versions"]:
            for res in version["resources"]:
                out[(group["metadata"].get("name", ""), version["version"], res["resource"])] = res
    return out


# Subresources the real server lists that the simulator does not serve, so does not list.
UNSERVED_SUBRESOURCES = {
    "pods/attach", "pods/binding", "pods/ephemeralcontainers", "pods/eviction", "pods/exec",
    "pods/log", "pods/portforward", "pods/proxy", "services/proxy", "nodes/proxy",
    "replicationcontrollers/scale", "deployments/scale", "replicasets/scale",
    "statefulsets/scale",
}


def _without_subresources(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "subresources"}


async def test_004_served_subresources_are_listed(world: Any) -> None:
    """namespaces/finalize and serviceaccounts/token are served, so they are listed (004)."""
    srv, session = world
    ref = load(4)
    _, raw, _ = await send(srv, session, ref)
    names = [r["name"] for r in json.loads(raw)["resources"]]
    assert {"namespaces/finalize", "namespaces/status", "serviceaccounts/token"} <= set(names)
    real = {r["name"] for r in ref["response"]["body"]["resources"]}
    parents = {n for n in names if "/" not in n}
    missing = {n for n in real - set(names) if n.split("/")[0] in parents and "/" in n}
    assert missing <= UNSERVED_SUBRESOURCES, missing


@pytest.mark.parametrize("number", [7, 8, 13])
async def test_007_008_013_aggregated_v2beta1(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    body, want = json.loads(raw), ref["response"]["body"]
    assert status == 200 and headers["Content-Type"] == ref["response"]["headers"]["Content-Type"]
    same_headers(headers, ref, "Cache-Control", "Vary")
    assert HASH.fullmatch(headers["Etag"].strip('"'))
    assert list(body) == list(want) and body["kind"] == want["kind"]
    assert body["apiVersion"] == want["apiVersion"]
    real_groups = {g["metadata"].get("name", ""): g for g in want["items"]}
    for group in body["items"]:
        wg = real_groups[group["metadata"].get("name", "")]
        assert list(group) == list(wg) and group["metadata"] == wg["metadata"]
        assert [v["version"] for v in group["versions"]] == [v["version"] for v in wg["versions"]]
        for version, wv in zip(group["versions"], wg["versions"], strict=True):
            assert list(version) == list(wv) and version["freshness"] == wv["freshness"]
    names = [g["metadata"].get("name", "") for g in body["items"]]
    assert names == [name for name in real_groups if name in names]  # the real order
    real = _aggregated_entries(want)
    got = _aggregated_entries(body)
    assert got and set(got) <= set(real)
    for key, entry in got.items():
        _exact(_without_subresources(entry), _without_subresources(real[key]))
        # subresources the simulator serves, exactly; it leaves out those it does not serve
        # (pods/exec, deployments/scale, ...: see UNSERVED_SUBRESOURCES)
        wsubs = {s["subresource"]: s for s in real[key].get("subresources", [])}
        subs = [s["subresource"] for s in entry.get("subresources", [])]
        assert subs == [name for name in wsubs if name in subs]
        for sub in entry.get("subresources", []):
            _exact(sub, wsubs[sub["subresource"]])
        missing = {f"{key[2]}/{name}" for name in wsubs if name not in subs}
        assert missing <= UNSERVED_SUBRESOURCES, missing
    pretty(raw)
    framing(headers, ref)


async def test_009_etag_round_trip(world: Any) -> None:
    srv, session = world
    ref = load(8)
    _, _, headers = await send(srv, session, ref)
    status, raw, again = await send(srv, session, ref,
                                    headers={"If-None-Match": headers["Etag"]})
    assert status == 304 and raw == b"" and again["Etag"] == headers["Etag"]


@pytest.mark.parametrize("number", [10, 12])
async def test_010_012_v2_only_is_406(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    assert_same_status(ref, status, json.loads(raw), headers)
    assert json.loads(raw)["message"] == ref["response"]["body"]["message"]
    pretty(raw)
    assert headers["Content-Length"] == ref["response"]["headers"]["Content-Length"]


# ---- 014-017: Table ---------------------------------------------------------------------


def _table_shape(body: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(body) == list(want) and list(body["metadata"]) == list(want["metadata"])
    assert body["columnDefinitions"] == want["columnDefinitions"]
    real = {r["cells"][0]: r for r in want["rows"]}
    assert [r["cells"][0] for r in body["rows"]] == list(real)
    for row in body["rows"]:
        wrow = real[row["cells"][0]]
        assert list(row) == list(wrow) and row["cells"][1] == wrow["cells"][1]
        assert re.fullmatch(r"\d+s", row["cells"][2])
        obj, wobj = row["object"], wrow["object"]
        assert list(obj) == list(wobj)
        assert (obj["kind"], obj["apiVersion"]) == (wobj["kind"], wobj["apiVersion"])
        assert list(obj["metadata"]) == list(wobj["metadata"])
        assert [(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]] == [
            (m["manager"], m["operation"]) for m in wobj["metadata"]["managedFields"]]


@pytest.mark.parametrize("number", [14, 15, 16])
async def test_014_015_016_tables(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and headers["Content-Type"] == "application/json"
    _table_shape(json.loads(raw), ref["response"]["body"])
    if number == 14:
        compact(raw)  # kubectl's own agent
    else:
        pretty(raw)
    framing(headers, ref)


async def test_017_table_watch(world: Any) -> None:
    srv, session = world
    ref = load(17)
    want = ref["response"]["lines"]

    async def actions() -> None:
        await asyncio.sleep(0.2)
        obj = srv.create_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "table-watched", "namespace": "default"}, "data": {"k": "v"}},
            manager="curl")
        await asyncio.sleep(0.1)
        obj["metadata"]["labels"] = {"x": "y"}
        srv.update_object(obj, manager="curl")
        await asyncio.sleep(0.1)
        srv.delete_object("v1", "ConfigMap", "table-watched")

    task = asyncio.create_task(actions())
    status, raw, headers = await send(
        srv, session, ref, raw_query=f"resourceVersion={srv.store.rv}&watch=true&timeoutSeconds=1")
    await task
    lines = [json.loads(x) for x in raw.splitlines()]
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers.get("Transfer-Encoding") == "chunked"
    assert [x["type"] for x in lines] == [x["type"] for x in want]
    assert [x["object"]["columnDefinitions"] is None for x in lines] == [
        x["object"]["columnDefinitions"] is None for x in want]
    for got, exp in zip(lines, want, strict=True):
        assert list(got) == list(exp)
        table, wtable = got["object"], exp["object"]
        assert list(table) == list(wtable) and list(table["metadata"]) == list(wtable["metadata"])
        assert len(table["rows"]) == 1 and table["rows"][0]["cells"][:2] == wtable["rows"][0][
            "cells"][:2]
        assert list(table["rows"][0]["object"]["metadata"]) == list(
            wtable["rows"][0]["object"]["metadata"])
    assert lines[0]["object"]["columnDefinitions"] == want[0]["object"]["columnDefinitions"]
    assert all(b"\n" not in line for line in raw.splitlines())  # events are never indented


# ---- 018-021: OpenAPI -------------------------------------------------------------------


async def test_018_openapi_v3_index(world: Any) -> None:
    srv, session = world
    ref = load(18)
    status, raw, headers = await send(srv, session, ref)
    body, want = json.loads(raw), ref["response"]["body"]
    assert status == 200
    same_headers(headers, ref, "Content-Type", "Cache-Control", "Accept-Ranges", "Etag")
    assert headers["Last-Modified"].endswith(" GMT")
    assert headers["Content-Length"] == str(len(raw)) and "Transfer-Encoding" not in headers
    assert not raw.endswith(b"\n") and b'": ' not in raw  # json.Marshal, for every agent
    assert list(body) == list(want) and set(body["paths"]) <= set(want["paths"])
    assert {"api/v1", "apis/apps/v1"} <= set(body["paths"])
    for key, entry in body["paths"].items():
        assert list(entry) == list(want["paths"][key])
        url, _, digest = entry["serverRelativeURL"].partition("?hash=")
        assert url == want["paths"][key]["serverRelativeURL"].partition("?")[0]
        assert HASH.fullmatch(digest)


async def test_019_openapi_v3_hashed_document(world: Any) -> None:
    srv, session = world
    _, raw, _ = await send(srv, session, load(18))
    url = json.loads(raw)["paths"]["api/v1"]["serverRelativeURL"]
    ref = load(19)
    want = ref["response"]["body"]
    path, _, query = url.partition("?")
    status, raw, headers = await send(srv, session, ref, path=path, raw_query=query)
    assert status == 200
    same_headers(headers, ref, "Content-Type", "Cache-Control", "Accept-Ranges", "Vary")
    assert headers["Etag"] == f'"{query.removeprefix("hash=")}"'
    assert re.fullmatch(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d UTC", headers["Expires"])
    assert headers["Last-Modified"].endswith(" GMT") and "Transfer-Encoding" not in headers
    body = json.loads(raw)
    assert list(body) == [{"paths_keys": "paths"}.get(k, k) for k in want if k != "_truncated"]
    assert body["openapi"] == want["openapi"] and body["info"] == want["info"]
    assert list(body["components"]) == list(want["components"])
    assert set(body["paths"]) <= set(want["paths_keys"])
    assert "/api/v1/namespaces/{namespace}/configmaps/{name}" in body["paths"]
    schema = body["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    wschema = want["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    assert json.dumps(schema) == json.dumps(wschema)  # same keys, order and text


async def test_021_openapi_v2_protobuf(world: Any) -> None:
    srv, session = world
    ref = load(21)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200
    same_headers(headers, ref, "Content-Type", "Cache-Control", "Accept-Ranges")
    assert HASH.fullmatch(headers["Etag"].strip('"'))
    assert headers.getall("Vary") == ref["response"]["headers"]["Vary"]
    assert raw.startswith(b"\n\x032.0\x12\x15\n\nKubernetes\x12\x07v1.28.7")


# ---- 124-129, 134: representations, pretty printing, 405, health ------------------------


@pytest.mark.parametrize("number", [124, 129])
async def test_124_129_errors_are_pretty_for_curl(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    body = json.loads(raw)
    assert_same_status(ref, status, body, headers)
    assert list(body) == list(ref["response"]["body"])
    pretty(raw)
    assert headers["Content-Length"] == ref["response"]["headers"]["Content-Length"]


def _norm_yaml(text: str) -> str:
    text = re.sub(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', "TIME", text)
    text = re.sub(r'resourceVersion: "\d+"', "RV", text)
    return norm(text)


async def test_125_yaml(world: Any) -> None:
    srv, session = world
    ref = load(125)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and headers["Content-Type"] == ref["response"]["headers"]["Content-Type"]
    assert _norm_yaml(raw.decode()) == _norm_yaml(ref["response"]["body"])


def test_126_protobuf_encoder_is_byte_exact() -> None:
    """The object of 125 (same uid, rv and times as 126) encodes to 126's very bytes."""
    obj = yaml.safe_load(load(125)["response"]["body"])
    want = base64.b64decode(load(126)["response"]["body"]["_base64"])
    assert _protobuf.encode_object(_configmaps(), obj) == want


def _configmaps() -> ResourceType:
    (rt,) = [t for t in BUILTIN_TYPES if t.kind == "ConfigMap"]
    return rt


async def test_126_protobuf_get(world: Any) -> None:
    srv, session = world
    ref = load(126)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200
    same_headers(headers, ref, "Content-Type", "Cache-Control")
    assert raw[:8].hex() == ref["response"]["body"]["_first_bytes_hex"][:16]
    stored = srv.get_object("v1", "ConfigMap", "target", namespace="errors")
    assert raw == _protobuf.encode_object(_configmaps(), stored)
    assert headers["Content-Length"] == str(len(raw))
    # a list is a ConfigMapList envelope; JSON stays available after protobuf in the Accept
    status, raw, _ = await send(srv, session, ref, path="/api/v1/namespaces/errors/configmaps")
    assert status == 200 and raw.startswith(b"k8s\x00\n\x13\n\x02v1\x12\rConfigMapList")
    status, raw, headers = await send(
        srv, session, ref, path="/api/v1/namespaces/default/secrets",
        headers={"Accept": "application/vnd.kubernetes.protobuf, application/json"})
    assert status == 200 and headers["Content-Type"] == "application/json"
    # kinds without an encoder here refuse a protobuf-only Accept, as CRs do on a real server
    status, raw, _ = await send(srv, session, ref, path="/api/v1/namespaces/default/secrets")
    assert status == 406


@pytest.mark.parametrize("number", [127, 128])
async def test_127_128_compact_json(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and headers["Content-Type"] == "application/json"
    compact(raw)
    want = ref["response"]["body"]
    want = json.loads(want) if isinstance(want, str) else want
    body = json.loads(raw)
    assert list(body) == list(want) and list(body["metadata"]) == list(want["metadata"])
    assert body["data"] == want["data"] and body["metadata"]["labels"] == want["metadata"][
        "labels"]


async def test_pretty_query_overrides_the_agent(world: Any) -> None:
    srv, session = world
    ref = load(127)
    _, raw, _ = await send(srv, session, ref, raw_query="pretty=true")
    pretty(raw)
    _, raw, _ = await send(srv, session, ref, raw_query="pretty=1")
    pretty(raw)
    for agent in ("Wget/1.21", "Mozilla/5.0 (X11)"):
        _, raw, _ = await send(srv, session, ref, headers={"User-Agent": agent})
        pretty(raw)


async def test_134_readyz_verbose(world: Any) -> None:
    srv, session = world
    ref = load(134)
    status, raw, headers = await send(srv, session, ref)
    assert status == 200 and raw.decode() == ref["response"]["body"]
    same_headers(headers, ref, "Content-Type", "Cache-Control", "X-Content-Type-Options",
                 "Content-Length")
    status, raw, _ = await send(srv, session, ref, raw_query="")
    assert status == 200 and raw == b"ok"
    status, raw, _ = await send(srv, session, ref, path="/livez")
    assert raw.decode().endswith("[+]poststarthook/apiservice-discovery-controller ok\n"
                                 "livez check passed\n")
    assert "[+]informer-sync ok" not in raw.decode()


# ---- kubectl-logs/: kubectl's own traffic, replayed with the real binaries ------------------

KUBECTL_DIR = Path(os.environ.get("WATCHKEEPER_KUBECTL_DIR", "/usr/lib/google-cloud-sdk/bin"))
LOGS = REF / "kubectl-logs"
_REQUEST = re.compile(r"\] (GET|POST|PUT|PATCH|DELETE) https?://[^/\s]+(/\S*)")
_STATUS = re.compile(r"Response Status: (\d{3})")
MANIFESTS = {  # the files behind 03-06 and 13, as their request bodies show them
    "cm-csa.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "kubectl-csa", "namespace": "default", "labels": {"app": "demo"}},
        "data": {"color": "blue"}},
    "cm-csa2.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "kubectl-csa", "namespace": "default", "labels": {"app": "demo"}},
        "data": {"color": "red", "size": "3"}},
    "cm-ssa.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "kubectl-ssa", "namespace": "default"}, "data": {"color": "green"}},
}


# Logs without a discovery fetch ran with the warm cache of an earlier kubectl 1.28 command.
WARM_CACHE = {"02": "01", "06": "05", "10": "08", "11": "08", "12": "08"}


def _url(url: str) -> str:
    """A request URL without client timeouts, and with hashes and resourceVersions elided."""
    path, _, query = url.partition("?")
    params = [re.sub(r"^(hash|resourceVersion)=.*", r"\1=X", p)
              for p in query.split("&") if p and not p.startswith("timeout=")]
    return path + ("?" + "&".join(params) if params else "")


def exchanges(log: str) -> list[tuple[str, str, int]]:
    """(method, URL, status) of every request in a kubectl -v=8 log (1.28 or 1.32 format)."""
    out, pending = [], None
    for line in log.splitlines():
        if m := _REQUEST.search(line):
            pending = (m[1], _url(m[2]))
        elif (m := _STATUS.search(line)) and pending is not None:
            out.append((*pending, int(m[1])))
            pending = None
    return out


def _stdout(log: str) -> str:
    return log.partition("# ---- stdout ----\n")[2]


def _command(log: str) -> tuple[str, list[str], int]:
    """(binary, arguments, exit code) from a log's header lines."""
    lines = log.splitlines()
    args = lines[0].removeprefix("# $ kubectl ").split("(")[0].split()
    version = re.search(r"Client Version: v1\.(\d+)", lines[1])
    code = re.search(r"# exit code: (\d+)", log)
    assert version and code
    return f"kubectl.1.{version[1]}", args, int(code[1])


async def _run(binary: Path, args: list[str], cwd: Path, cache: Path, kubeconfig: str,
               srv: ApiServer, watch: bool) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(binary), "--kubeconfig", kubeconfig, "--cache-dir", str(cache), "-v=8", *args,
        cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(cwd)})
    if watch:  # 07: create, label and delete a configmap while `get -w` runs, then SIGINT
        await asyncio.sleep(1.5)
        obj = srv.create_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "watched", "namespace": "default"}, "data": {"k": "v"}})
        await asyncio.sleep(0.3)
        obj["metadata"]["labels"] = {"x": "y"}
        srv.update_object(obj)
        await asyncio.sleep(0.3)
        srv.delete_object("v1", "ConfigMap", "watched")
        await asyncio.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.kubectl
@pytest.mark.skipif(not (KUBECTL_DIR / "kubectl.1.28").is_file()
                    or not (KUBECTL_DIR / "kubectl.1.32").is_file(),
                    reason="kubectl 1.28 and 1.32 binaries not installed")
async def test_kubectl_logs_replayed(tmp_path: Path) -> None:
    """Every command of kubectl-logs/ in order, against one simulator holding what the real
    server held (pre-existing): the same requests, in the same order, get the same status
    codes; the exit code and the printed output (numbers and uids normalised) match."""
    for name, obj in MANIFESTS.items():
        (tmp_path / name).write_text(yaml.safe_dump(obj))
    async with ApiServer(tls=True) as srv:
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "pre-existing", "namespace": "default", "labels": {"app": "demo"}},
            "data": {"k": "v"}}, manager="curl")
        kubeconfig = srv.kubeconfig(tmp_path / "kubeconfig", "admin")
        for path in sorted(LOGS.glob("*.log")):
            log = path.read_text()
            binary, args, want_code = _command(log)
            cache = tmp_path / f"cache-{WARM_CACHE.get(path.name[:2], path.name[:2])}"
            code, out, err = await _run(KUBECTL_DIR / binary, args, tmp_path, cache,
                                        kubeconfig, srv, watch="-w" in args)
            assert exchanges(err) == exchanges(log), path.name
            if want_code == 124:  # `timeout -s INT` reported its own 124; kubectl exits 1
                assert code in (1, -signal.SIGINT), (path.name, err[-2000:])
            else:
                assert code == want_code, (path.name, err[-2000:])
            assert norm(out) == norm(_stdout(log)), path.name
