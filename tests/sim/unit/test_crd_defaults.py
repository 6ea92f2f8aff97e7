"""Structural defaulting of custom resources (storage/structural.py): the answers below are
kube-apiserver 1.28.7's for the same CRD and requests (recorded 2026-12-05)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                     "type": "object", "properties": {
                         "size": {"type": "integer", "default": 1},
                         "note": {"type": "string", "nullable": True, "default": "n"},
                         "parts": {"type": "array", "items": {
                             "type": "object", "required": ["id"], "properties": {
                                 "id": {"type": "integer"},
                                 "kind": {"type": "string", "default": "bolt"}}}},
                         "byName": {"type": "object", "additionalProperties": {
                             "type": "object", "properties": {
                                 "weight": {"type": "integer", "default": 5}}}},
                         "inner": {"type": "object", "default": {}, "properties": {
                             "depth": {"type": "integer", "default": 2}}},
                     }}}}}}]},
}
BASE = {"inner": {"depth": 2}, "note": "n", "size": 1}


@pytest.fixture
async def gadgets(apiserver: ApiServer) -> AsyncIterator[wk.Api]:
    apiserver.create_object(CRD)
    async with apiserver.client() as client:
        yield client.api("gadgets.example.com", namespace="default")


def gadget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name},
            "spec": spec}


@pytest.mark.parametrize(("spec", "stored"), [
    # absent: the default, and the defaults inside a defaulted object ({} -> depth 2)
    ({}, BASE),
    # null where the schema is not nullable: dropped, then defaulted; a nullable null stays
    ({"size": None, "note": None}, {**BASE, "note": None}),
    # inside list items and map values, defaulted or given
    ({"parts": [{"id": 1}, {"id": 2, "kind": "nut"}]},
     {**BASE, "parts": [{"id": 1, "kind": "bolt"}, {"id": 2, "kind": "nut"}]}),
    ({"byName": {"a": {}, "b": {"weight": 1}}},
     {**BASE, "byName": {"a": {"weight": 5}, "b": {"weight": 1}}}),
    ({"inner": None}, BASE),
], ids=["absent", "nulls", "list-items", "map-values", "null-object"])
async def test_defaults_fill_what_is_absent(gadgets: wk.Api, spec: dict[str, Any],
                                            stored: dict[str, Any]) -> None:
    created = await gadgets.create(gadget("g", spec))
    assert created["spec"] == stored
    assert (await gadgets.get("g"))["spec"] == stored


async def test_a_required_null_is_missing_not_a_wrong_type(gadgets: wk.Api) -> None:
    with pytest.raises(wk.Invalid) as err:
        await gadgets.create(gadget("g", {"parts": [{"id": None}]}))
    assert [(c["field"], c["message"]) for c in err.value.details["causes"]] == [
        ("spec.parts[0].id", "Required value")]


async def test_a_patch_that_removes_a_defaulted_field_gets_the_default_back(
    gadgets: wk.Api,
) -> None:
    await gadgets.create(gadget("g", {"size": 4}))
    patched = await gadgets.patch("g", {"spec": {"size": None, "inner": {"depth": 7}}})
    assert patched["spec"] == {"inner": {"depth": 7}, "note": "n", "size": 1}
