"""Issue 22, case 5: integers a Go int32/int64 field cannot hold, replayed from
tests/fixtures/apiserver-1.28-issue22 files 063-086.

A body (POST, PUT) that does not decode is 400; a JSON or merge patch whose result does not
decode is 422 on "patch"; a strategic merge patch or an apply converts instead (the value
wraps around: 4294967299 is stored as 3, 2147483648 fails validation as -2147483648). A
custom resource's ``format: int32`` is not enforced; beyond int64 a number is no integer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ._issue22 import GROUP, World, crd, load22, send, want, world
from .test_contract import assert_same_status

DEPLOYS = "/apis/apps/v1/namespaces/cases-5/deployments"


@pytest.fixture
async def cases5() -> AsyncIterator[World]:
    async for w in world("cases-5"):
        yield w


def tail(message: str) -> str:
    """A patch error's reason: what follows the quoted object."""
    return message.rsplit('": ', 1)[-1]


async def test_bodies_that_do_not_decode_are_400(cases5: World) -> None:
    srv, session = cases5
    for number in range(63, 71):  # replicas, containerPort, Service ports, int64 fields
        status, body, headers = await send(srv, session, number)
        assert_same_status(load22(number), status, body, headers)
        assert body["message"] == want(number)["message"], number
    status, _, _ = await send(srv, session, 63, body=load22(63)["request"]["body"] | {
        "spec": load22(63)["request"]["body"]["spec"] | {"replicas": 2147483647}})
    assert status == 201  # the largest int32 is fine


async def test_patches_decode_or_convert_like_a_real_server(cases5: World) -> None:
    srv, session = cases5
    made = srv.create_object({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "d", "namespace": "cases-5"}, "spec": {"replicas": 2}}, manager="curl")
    put = dict(load22(71)["request"]["body"])
    put["metadata"] = dict(made["metadata"])
    status, body, headers = await send(srv, session, 71, body=put)  # PUT: 400
    assert_same_status(load22(71), status, body, headers)
    for number in (72, 73):  # merge and JSON patch: the result does not decode
        status, body, headers = await send(srv, session, number)
        assert_same_status(load22(number), status, body, headers, exact=False)
        assert tail(body["message"]) == tail(want(number)["message"])
        assert body["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    status, body, headers = await send(srv, session, 74)  # SMP: wraps, then validation
    assert_same_status(load22(74), status, body, headers)
    assert body["details"] == want(74)["details"]
    for number, replicas in ((75, 3), (78, 2)):  # SMP 4294967299 and apply 4294967298
        status, body, _ = await send(srv, session, number)
        assert status == 200 and body["spec"]["replicas"] == replicas == (
            want(number)["spec"]["replicas"])
    for number in (76, 77, 79):  # a fraction, a string; an apply's fraction is a 500
        status, body, headers = await send(srv, session, number)
        assert_same_status(load22(number), status, body, headers)
        assert body == want(number)
    assert srv.get_object("apps/v1", "Deployment", "d", namespace="cases-5")["spec"][
        "replicas"] == 2


async def test_custom_resources_do_not_enforce_int32(cases5: World) -> None:
    srv, session = cases5
    srv.create_object(crd("widgets", "Widget", {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "format": "int32"},
        "big": {"type": "integer", "format": "int64"},
        "count": {"type": "integer"}, "ratio": {"type": "number"}}}}), manager="curl")
    for number in range(80, 87):
        status, body, headers = await send(srv, session, number)
        expected = want(number)
        if status >= 400 or load22(number)["response"]["status"] >= 400:
            assert_same_status(load22(number), status, body, headers)
            assert body["details"]["causes"] == expected["details"]["causes"], number
        else:
            assert status == load22(number)["response"]["status"], number
            assert body["spec"] == expected["spec"], number  # 2147483648 as sent; 3.0 is 3
    assert srv.get_object(f"{GROUP}/v1", "Widget", "w-int32", namespace="cases-5")["spec"] == {
        "size": 4294967299}
