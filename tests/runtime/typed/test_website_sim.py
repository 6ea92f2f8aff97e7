"""The Website scenario of the real-cluster test (tests/e2e/website_cases.py), against the
simulator: the CRD generated from examples/website.py installs, and objects are defaulted
and rejected as kube-apiserver 1.28.7 does. What the simulator does not do yet is marked
with the gap (strict: the mark goes once the simulator learns it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

import watchkeeper as wk
from e2e.website_cases import CASES, DOMAIN_IMMUTABLE, Case, causes_of, website
from sim._util import auth
from watchkeeper_sim import ApiServer

from .website import Website

GROUP = "example.com"


@pytest.fixture
async def sites(apiserver: ApiServer) -> AsyncIterator[wk.Api]:
    async with apiserver.client() as client:
        await wk.install_crds(client, Website)
        yield client.api(f"websites.{GROUP}", namespace="default")


def _case(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason="; ".join(case.sim_gap))] if case.sim_gap else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_case(c) for c in CASES])
async def test_objects_are_defaulted_and_rejected_as_declared(sites: wk.Api, case: Case) -> None:
    try:
        created = await sites.create(website(GROUP, case, "default"))
    except wk.Invalid as exc:
        assert case.causes is not None, f"refused: {causes_of(exc.details)}"
        assert causes_of(exc.details) == case.causes
        assert exc.details["kind"] == "Website" and exc.details["name"] == case.name
        return
    assert case.causes is None, f"created, but the API server refuses it: {case.causes}"
    assert created["spec"] == case.stored
    # the class's own defaults are the server's: what was sent, read by the class, is what
    # the server stored
    stored = msgspec.convert(created, Website)
    sent = msgspec.convert(website(GROUP, case, "default"), Website)
    assert stored.spec == sent.spec  # type: ignore[attr-defined]


async def test_a_transition_rule_keeps_the_domain(sites: wk.Api) -> None:
    case = CASES[1]  # "explicit": has a domain
    await sites.create(website(GROUP, case, "default"))
    with pytest.raises(wk.Invalid) as err:
        await sites.patch(case.name, {"spec": {"domain": "other.example.com"}})
    assert causes_of(err.value.details) == [DOMAIN_IMMUTABLE]


async def test_install_is_idempotent_and_owned_by_its_field_manager(apiserver: ApiServer) -> None:
    async with apiserver.client() as client:
        [first] = await wk.install_crds(client, Website)
        [again] = await wk.install_crds(client, Website)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert again["metadata"]["generation"] == 1
        managers = {m["manager"]: m["operation"] for m in first["metadata"]["managedFields"]}
        assert managers.get("watchkeeper") == "Apply"
        assert {c["type"]: c["status"] for c in first["status"]["conditions"]} == {
            "NamesAccepted": "True", "Established": "True"}
        # served at once: the client's discovery finds the new resource
        api = client.api("ws")
        assert (await api.resource()).qualified == f"websites.{GROUP}"


RECORDED = json.loads((Path(__file__).parent / "website_scale.json").read_text())


def _recorded(key: str, name: str) -> Any:
    """One of the real server's answers (website_scale.json), for this object and group."""
    text = json.dumps(RECORDED[key])
    return json.loads(text.replace("{name}", name).replace("{ns}", "default")
                      .replace("{group}", GROUP))


def _normalized(scale: dict[str, Any]) -> dict[str, Any]:
    meta = {**scale["metadata"], "uid": "<uid>", "resourceVersion": "<rv>",
            "creationTimestamp": "<time>"}
    return {**scale, "metadata": meta}


async def test_the_scale_subresource(apiserver: ApiServer, sites: wk.Api) -> None:
    name = CASES[0].name
    created = await sites.create(website(GROUP, CASES[0], "default"))
    path = f"/apis/{GROUP}/v1/namespaces/default/websites/{name}/scale"
    async with aiohttp.ClientSession(apiserver.url, headers=auth(apiserver)) as http:
        async with http.get(f"/apis/{GROUP}/v1") as resp:
            assert _recorded("discovery", name) in (await resp.json())["resources"]
        async with http.get(path) as resp:
            scale = await resp.json()
        assert resp.status == 200 and list(scale) == list(RECORDED["get"])
        assert _normalized(scale) == _recorded("get", name)
        assert scale["metadata"]["uid"] == created["metadata"]["uid"]
        assert scale["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        merge = {"Content-Type": "application/merge-patch+json"}
        for replicas in (11, -1):  # the CR's schema, then the scale's own check and the rule
            async with http.patch(path, json={"spec": {"replicas": replicas}},
                                  headers=merge) as resp:
                assert (resp.status, await resp.json()) == (
                    422, _recorded(f"patch replicas {replicas}", name))
        async with sites.watch(resource_version=created["metadata"]["resourceVersion"]) as events:
            async with http.patch(path, json=[{"op": "replace", "path": "/spec/replicas",
                                               "value": 4}],
                                  headers={"Content-Type": "application/json-patch+json"}) as resp:
                scale = await resp.json()
            assert (resp.status, _normalized(scale)) == (
                200, _recorded("json patch replicas 4", name))
            event = await anext(aiter(events))
        assert event.type == "MODIFIED" and event.object["spec"]["replicas"] == 4
        assert event.object["metadata"]["resourceVersion"] == scale["metadata"]["resourceVersion"]
        assert event.object["metadata"]["generation"] == RECORDED["generation after"]
        old_rv = created["metadata"]["resourceVersion"]
        stale = {"apiVersion": "autoscaling/v1", "kind": "Scale",
                 "metadata": {"name": name, "resourceVersion": old_rv}, "spec": {"replicas": 2}}
        async with http.put(path, json=stale) as resp:
            assert (resp.status, await resp.json()) == (
                409, _recorded("put with a stale resourceVersion", name))
        async with http.delete(path) as resp:
            body = await resp.json()
        wanted = _recorded("delete", name)
        assert (body["code"], body["reason"], body["message"]) == (
            wanted["code"], wanted["reason"], wanted["message"])
        # a PUT with the current resourceVersion (or none) writes
        async with http.put(path, json={**stale, "metadata": {
                "name": name, "resourceVersion": scale["metadata"]["resourceVersion"]}}) as resp:
            scale = await resp.json()
        assert (resp.status, scale["spec"]) == (200, {"replicas": 2})
    assert (await sites.get(name))["spec"]["replicas"] == 2
