"""Versions of one resource: conversions written in Python (``@wk.conversion``), round trips
that keep what only one version can hold (in an annotation, as Kubernetes' hub and spoke
conversions do), and the CRD with every version (served, storage, deprecated)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from .versions import (
    GROUP,
    SiteV1,
    SiteV1alpha1,
    SiteV1beta1,
    SpecV1,
    SpecV1alpha1,
    SpecV1beta1,
    Status,
)

KEEP_ALPHA = wk.CONVERSION_ANNOTATION + "v1alpha1"
KEEP_V1 = wk.CONVERSION_ANNOTATION + "v1"


def alpha(**spec: Any) -> SiteV1alpha1:
    return SiteV1alpha1(
        metadata=wk.ObjectMeta(name="s", namespace="default", labels={"app": "web"},
                               annotations={"note": "mine"}),
        spec=SpecV1alpha1(**{"image": "nginx:1.25", **spec}), status=Status(ready=2))


def test_v1alpha1_to_v1_and_back_keeps_a_field_only_v1alpha1_has() -> None:
    old = alpha(replicas=3, debug=True)
    new = wk.convert(old, SiteV1)
    assert isinstance(new, SiteV1) and (new.api_version, new.kind) == (f"{GROUP}/v1", "Site")
    assert new.spec == SpecV1(image="nginx:1.25", replicas=3)
    assert new.status == Status(ready=2)
    assert (new.metadata.name, new.metadata.labels) == ("s", {"app": "web"})
    assert json.loads(new.metadata.annotations[KEEP_ALPHA]) == {
        "set": [[["spec", "debug"], True]], "unset": []}
    again = wk.convert(new, SiteV1alpha1)
    assert again == old  # the annotation is gone again, debug is back
    assert again.metadata.annotations == {"note": "mine"}
    assert old.metadata.annotations == {"note": "mine"}  # the source is not changed


def test_v1_to_v1alpha1_and_back_keeps_a_field_only_v1_has() -> None:
    new = SiteV1(metadata=wk.ObjectMeta(name="s"), spec=SpecV1(image="i", tier="premium"))
    old = wk.convert(new, SiteV1alpha1)
    assert old.spec == SpecV1alpha1(image="i")
    assert json.loads(old.metadata.annotations[KEEP_V1])["set"] == [[["spec", "tier"],
                                                                     "premium"]]
    assert wk.convert(old, SiteV1) == new


def test_what_the_other_version_changed_meanwhile_wins_over_nothing() -> None:
    """A shared field changed while the object was v1 is converted; the kept field comes
    back beside it."""
    new = wk.convert(alpha(debug=True), SiteV1)
    new.spec.replicas = 7
    back = wk.convert(new, SiteV1alpha1)
    assert back.spec == SpecV1alpha1(image="nginx:1.25", replicas=7, debug=True)


def test_nothing_lost_means_no_annotation() -> None:
    new = wk.convert(alpha(replicas=2), SiteV1)
    assert new.metadata.annotations == {"note": "mine"}


def test_spoke_to_spoke_goes_through_the_hub() -> None:
    old = alpha(replicas=4, debug=True)
    beta = wk.convert(old, SiteV1beta1)
    assert beta.spec == SpecV1beta1(image="nginx:1.25", size=4)
    assert KEEP_ALPHA in beta.metadata.annotations  # kept across the hub
    assert wk.convert(beta, SiteV1alpha1) == old


def test_a_dict_as_the_server_sends_it() -> None:
    sent = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Site",
            "metadata": {"name": "s", "uid": "u-1", "resourceVersion": "5"},
            "spec": {"image": "i", "replicas": 2, "debug": True}}
    new = wk.convert(sent, SiteV1)
    assert new.spec == SpecV1(image="i", replicas=2)
    assert (new.metadata.uid, new.metadata.resource_version) == ("u-1", "5")
    assert wk.convert(sent, SiteV1alpha1).spec.debug is True  # already that version
    with pytest.raises(wk.SchemaError, match="no registered version"):
        wk.convert({**sent, "apiVersion": f"{GROUP}/v9"}, SiteV1)


def test_registration_mistakes_are_schema_errors() -> None:
    @wk.custom_resource(group="other.example.com", version="v1", kind="Site")
    class Elsewhere(wk.CustomResource):
        spec: SpecV1

    with pytest.raises(wk.SchemaError, match="not two versions of one resource"):
        wk.conversion(SiteV1, Elsewhere)
    with pytest.raises(wk.SchemaError, match="no conversion registered"):
        wk.convert(SiteV1(spec=SpecV1(image="i")), Elsewhere)


def test_the_crd_has_every_version() -> None:
    crd = wk.crd(SiteV1alpha1, SiteV1beta1, SiteV1)
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert list(versions) == ["v1alpha1", "v1beta1", "v1"]
    assert [(v["served"], v["storage"]) for v in versions.values()] == [
        (True, False), (True, False), (True, True)]
    assert versions["v1alpha1"]["deprecated"] is True
    assert versions["v1alpha1"]["deprecationWarning"] == (
        "versions.example.com/v1alpha1 Site is deprecated; use v1")
    assert "deprecated" not in versions["v1"]
    props = versions["v1alpha1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "debug" in props["properties"] and "tier" not in props["properties"]


async def test_the_versions_are_served(apiserver: ApiServer) -> None:
    """Installed, each version is served; without a conversion webhook the server changes
    apiVersion only, which is why the conversions run in Python for now."""
    async with apiserver.client() as client:
        await wk.install_crds(client, SiteV1alpha1, SiteV1beta1, SiteV1)
        v1 = client.api(SiteV1, namespace="default")
        created = await v1.create(SiteV1(metadata=wk.ObjectMeta(name="s", namespace="default"),
                                         spec=SpecV1(image="i", replicas=2)))
        as_alpha = wk.convert(created, SiteV1alpha1)
        assert (as_alpha.metadata.uid, as_alpha.spec.replicas) == (created.metadata.uid, 2)
        read = await client.api(SiteV1alpha1, namespace="default").get("s")
        assert read.api_version == f"{GROUP}/v1alpha1"
