"""Strategic merge patch with the Go types' tags, and the unstructured converter's integer
conversion (issue 22, cases 2 and 5). Orders and messages are kube-apiserver 1.28.7's
(tests/fixtures/apiserver-1.28-issue22 021, 029, 033-036, 074-077)."""

from __future__ import annotations

from typing import Any

import pytest

from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.storage import gotypes
from watchkeeper_sim.storage.patchmeta import meta_of
from watchkeeper_sim.storage.strategic import StrategicError, strategic_merge

CONFIGMAP = ResourceType(group="", version="v1", plural="configmaps", kind="ConfigMap",
                         namespaced=True)
DEPLOYMENT = ResourceType(group="apps", version="v1", plural="deployments",
                          kind="Deployment", namespaced=True)


def ref(name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, **extra}


def smp(target: dict[str, Any], patch: dict[str, Any], rt: ResourceType = CONFIGMAP
        ) -> dict[str, Any]:
    out: dict[str, Any] = strategic_merge(target, patch, meta_of(rt))
    return out


def test_owner_references_merge_by_uid_new_ones_first() -> None:
    doc = {"metadata": {"ownerReferences": [ref("web", "u1", controller=True)]}}
    out = smp(doc, {"metadata": {"ownerReferences": [ref("web", "u2")]}})
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["u2", "u1"]
    again = smp(out, {"metadata": {"ownerReferences": [ref("web", "u1", controller=False)]}})
    assert [(r["uid"], r.get("controller")) for r in again["metadata"]["ownerReferences"]] \
        == [("u2", None), ("u1", False)]  # merged into the u1 entry, in place
    gone = smp(out, {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}]}})
    assert [r["uid"] for r in gone["metadata"]["ownerReferences"]] == ["u2"]


def test_a_merge_list_item_without_its_key_is_an_error() -> None:
    with pytest.raises(StrategicError) as err:
        smp({"metadata": {"ownerReferences": [ref("a", "u1")]}},
            {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                               "name": "x"}]}})
    assert err.value.code == 500
    assert str(err.value) == ("map: map[apiVersion:v1 kind:ConfigMap name:x] does not contain "
                              "declared merge key: uid")


def test_finalizers_are_a_set() -> None:
    doc = {"metadata": {"finalizers": ["a"]}}
    out = smp(doc, {"metadata": {"finalizers": ["b", "a"]}})
    assert out["metadata"]["finalizers"] == ["b", "a"]
    out = smp(out, {"metadata": {"finalizers": ["c"]}})
    assert out["metadata"]["finalizers"] == ["c", "b", "a"]
    out = smp(out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}})
    assert out["metadata"]["finalizers"] == ["c", "a"]
    out = smp(out, {"metadata": {"$setElementOrder/finalizers": ["a", "c"]}})
    assert out["metadata"]["finalizers"] == ["a", "c"]


def test_untagged_lists_are_replaced_and_maps_merged() -> None:
    doc = {"spec": {"selector": {"matchLabels": {"a": "1"}}, "template": {"spec": {
        "containers": [{"name": "c", "image": "1", "args": ["x", "y"]}],
        "tolerations": [{"key": "k1"}]}}}}
    out = smp(doc, {"spec": {"selector": {"matchLabels": {"b": "2"}}, "template": {"spec": {
        "containers": [{"name": "c", "args": ["z"]}], "tolerations": [{"key": "k2"}]}}}},
        DEPLOYMENT)
    assert out["spec"]["selector"]["matchLabels"] == {"a": "1", "b": "2"}
    pod = out["spec"]["template"]["spec"]
    assert pod["containers"] == [{"name": "c", "image": "1", "args": ["z"]}]
    assert pod["tolerations"] == [{"key": "k2"}]
    replaced = smp(doc, {"spec": {"template": {"spec": {"containers": [
        {"name": "d", "image": "2"}, {"$patch": "replace"}]}}}}, DEPLOYMENT)
    assert replaced["spec"]["template"]["spec"]["containers"] == [{"name": "d", "image": "2"}]
    retained = smp({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": 1}}}}, {"spec": {"strategy": {"$retainKeys": ["type"],
                                                  "type": "Recreate"}}}, DEPLOYMENT)
    assert retained["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize(("value", "stored"), [
    (3, 3), (2147483647, 2147483647), (2147483648, -2147483648), (4294967299, 3),
    (7.0, 7), (9223372036854775808, 0), (None, None)])
def test_a_strategic_merge_patch_wraps_int32(value: Any, stored: Any) -> None:
    obj = {"spec": {"replicas": value}}
    gotypes.convert(obj, DEPLOYMENT)
    assert obj["spec"]["replicas"] == stored


@pytest.mark.parametrize(("value", "message"), [
    (1.5, "cannot convert float64 to int32"), ("3", "unrecognized type: int32"),
    (True, "unrecognized type: int32")])
def test_what_the_converter_refuses(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gotypes.convert({"spec": {"replicas": value}}, DEPLOYMENT)


@pytest.mark.parametrize(("body", "message"), [
    ({"spec": {"replicas": 2147483648}}, "json: cannot unmarshal number 2147483648 into Go "
     "struct field DeploymentSpec.spec.replicas of type int32"),
    ({"spec": {"replicas": 3.0}}, "json: cannot unmarshal number 3.0 into Go struct field "
     "DeploymentSpec.spec.replicas of type int32"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": 4294967376}]}]}}}}, "json: cannot unmarshal number 4294967376 into "
     "Go struct field ContainerPort.spec.template.spec.containers.ports.containerPort of type "
     "int32"),
    ({"metadata": {"generation": 2**63}}, "json: cannot unmarshal number 9223372036854775808 "
     "into Go struct field ObjectMeta.metadata.generation of type int64"),
    ({"spec": {"replicas": 2147483647, "minReadySeconds": -(2**31)}}, None),
])
def test_what_decoding_a_body_refuses(body: dict[str, Any], message: str | None) -> None:
    assert gotypes.decode_error(body, DEPLOYMENT) == message
