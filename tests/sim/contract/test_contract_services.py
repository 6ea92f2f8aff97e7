"""Issue 22, case 3: what kube-apiserver fills in a Service, replayed from
tests/fixtures/apiserver-1.28-issue22 files 037-058.

Defaults (owned by the writer) and allocations (owned by nobody) as the capture shows them;
allocated cluster IPs and node ports are normalised: any address of the service CIDR and
any port of the node port range will do, the shape must match."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ._issue22 import World, load22, norm22, send, want, world
from .test_contract import assert_same_status

CIDR = ipaddress.IPv4Network("10.0.0.0/24")  # the captured server's and the simulator's
MADE = range(37, 46)
REFUSED = range(46, 56)


@pytest.fixture
async def cases3() -> AsyncIterator[World]:
    async for w in world("cases-3"):
        yield w


def allocated(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with allocated values replaced by their shape (checked against the range)."""
    out = dict(spec)
    for key in ("clusterIP",):
        if out.get(key) not in (None, "None", "10.0.0.77"):  # 77: requested in file 044
            assert ipaddress.IPv4Address(out[key]) in CIDR, out[key]
            out[key] = "<allocated>"
    if isinstance(out.get("clusterIPs"), list):
        out["clusterIPs"] = ["<allocated>" if ip not in ("None", "10.0.0.77") else ip
                             for ip in out["clusterIPs"]]
    ports = []
    for port in out.get("ports") or []:
        port = dict(port)
        if "nodePort" in port and port["nodePort"] != 30444:  # 30444: requested in 040
            assert 30000 <= port["nodePort"] <= 32767, port
            port["nodePort"] = "<allocated>"
        ports.append(port)
    if ports:
        out["ports"] = ports
    return out


def owned(obj: dict[str, Any]) -> set[str]:
    """The spec fields the creator owns in managedFields (top level)."""
    entry = obj["metadata"]["managedFields"][0]
    return set(entry["fieldsV1"].get("f:spec", {})) - {"."}


async def test_services_get_defaults_and_allocations(cases3: World) -> None:
    srv, session = cases3
    for number in MADE:
        status, body, _ = await send(srv, session, number)
        expected = want(number)
        assert status == 201, (number, body)
        assert list(body["spec"]) == list(expected["spec"]), number  # the struct's order
        assert allocated(body["spec"]) == allocated(expected["spec"]), number
        assert body["status"] == expected["status"] == {"loadBalancer": {}}
        # defaults belong to the writer, allocations to nobody
        assert owned(body) == owned(expected), number
        assert not owned(body) & {"f:clusterIPs", "f:ipFamilies", "f:ipFamilyPolicy"}


async def test_service_mistakes_are_refused_like_a_real_server(cases3: World) -> None:
    srv, session = cases3
    for number in MADE:  # 049 and 051 need the address and port taken by 044 and 040
        await send(srv, session, number)
    for number in REFUSED:
        status, body, headers = await send(srv, session, number)
        assert_same_status(load22(number), status, body, headers)
        assert [(c["reason"], c["field"], norm22(c["message"]))
                for c in body["details"]["causes"]] == [
            (c["reason"], c["field"], norm22(c["message"]))
            for c in want(number)["details"]["causes"]], number


async def test_service_updates_keep_what_was_allocated(cases3: World) -> None:
    srv, session = cases3
    status, made, _ = await send(srv, session, 37)
    assert status == 201
    put = dict(load22(56)["request"]["body"])
    put["metadata"] = dict(put["metadata"], resourceVersion=made["metadata"]["resourceVersion"])
    status, body, _ = await send(srv, session, 56, body=put)  # PUT without clusterIP
    assert status == 200
    assert body["spec"]["clusterIP"] == made["spec"]["clusterIP"]
    assert allocated(body["spec"]) == allocated(want(56)["spec"])
    status, body, headers = await send(srv, session, 57)  # the cluster IP may not change
    assert_same_status(load22(57), status, body, headers)
    status, body, _ = await send(srv, session, 58)  # ClusterIP -> NodePort: a node port
    assert status == 200
    assert allocated(body["spec"]) == allocated(want(58)["spec"])
    assert body["spec"]["clusterIP"] == made["spec"]["clusterIP"]
