"""A resource class -> its CRD: identity, names, versions, printer columns, subresources;
and the mistakes the API server would refuse, refused first with the class's name."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
import pytest

import watchkeeper as wk

from .website import Website, example


def test_the_example_website_crd() -> None:
    crd = wk.crd(Website)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"] == {"name": "websites.example.com"}
    spec = crd["spec"]
    assert spec["group"] == "example.com" and spec["scope"] == "Namespaced"
    assert spec["names"] == {"kind": "Website", "listKind": "WebsiteList", "plural": "websites",
                             "singular": "website", "shortNames": ["ws"], "categories": ["web"]}
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["additionalPrinterColumns"] == [
        {"name": "Image", "type": "string", "jsonPath": ".spec.image",
         "description": "The container image serving the site, e.g. nginx:1.25."},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas",
         "description": "How many pods serve the site."},
        {"name": "Tier", "type": "string", "jsonPath": ".spec.tier",
         "description": "The service level: decides the resources each pod gets.",
         "priority": 1},
        {"name": "Ready", "type": "string",
         "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                  "labelSelectorPath": ".status.selector"}}
    root = version["schema"]["openAPIV3Schema"]
    assert root["description"] == "A static website served by a pool of web server pods."
    assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["apiVersion"]["type"] == "string"
    assert root["properties"]["apiVersion"]["description"].startswith("APIVersion defines")
    assert root["required"] == ["spec"]
    spec_schema = root["properties"]["spec"]
    assert spec_schema["required"] == ["image"]
    assert spec_schema["x-kubernetes-validations"] == [
        {"rule": "self.minReplicas <= self.replicas",
         "message": "minReplicas must not exceed replicas", "fieldPath": ".minReplicas"}]
    props = spec_schema["properties"]
    assert props["replicas"] == {"description": "How many pods serve the site.",
                                 "type": "integer", "default": 1, "minimum": 1, "maximum": 10}
    assert props["tier"]["enum"] == ["free", "standard", "premium"]
    assert props["tier"]["default"] == "standard"
    assert props["ports"]["x-kubernetes-list-map-keys"] == ["name"]
    assert props["maxUnavailable"]["x-kubernetes-int-or-string"] is True
    assert props["memory"]["pattern"] == wk.QUANTITY_PATTERN
    status = root["properties"]["status"]["properties"]
    assert status["conditions"]["x-kubernetes-list-type"] == "map"
    assert status["conditions"]["items"]["required"] == ["type", "status", "lastTransitionTime",
                                                         "reason"]
    assert status["observedGeneration"] == {
        "description": "The metadata.generation the status describes.", "type": "integer",
        "nullable": True}


def test_the_example_decodes_what_the_server_returns_and_fills_its_type_meta() -> None:
    """The same class reads objects: wire names, defaults, and apiVersion/kind by itself."""
    obj = {"apiVersion": "example.com/v1", "kind": "Website",
           "metadata": {"name": "site", "namespace": "default", "generation": 2},
           "spec": {"image": "nginx:1.25", "replicas": 3, "minReplicas": 2,
                    "ports": [{"name": "http", "port": 80}]},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Up",
                                      "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    site = msgspec.convert(obj, Website)
    spec = site.spec  # type: ignore[attr-defined]
    assert (spec.replicas, spec.min_replicas, spec.tier, spec.ports[0].protocol) == (
        3, 2, "standard", "TCP")
    assert site.status.conditions[0].last_transition_time.year == 2024  # type: ignore[attr-defined]
    fresh = Website(spec=example.WebsiteSpec(image="nginx:1.25"))  # type: ignore[call-arg]
    assert (fresh.api_version, fresh.kind) == ("example.com/v1", "Website")
    assert site.metadata.generation == 2 and site.metadata.name == "site"
    assert msgspec.to_builtins(fresh) == {"apiVersion": "example.com/v1", "kind": "Website",
                                          "metadata": {}, "spec": {"image": "nginx:1.25"}}
    with pytest.raises(msgspec.ValidationError, match=r"<= 10 - at `\$.spec.replicas`"):
        msgspec.convert({**obj, "spec": {"image": "x", "replicas": 11}}, Website)


# -- names and identity -----------------------------------------------------------------------


class Spec(wk.Schema):
    size: int = 1


@wk.custom_resource(group="example.com", version="v1", scope="Cluster")
class Policy(wk.CustomResource):
    spec: Spec


def test_names_default_from_the_kind_and_a_class_without_status_has_no_subresource() -> None:
    crd = wk.crd(Policy)
    assert crd["metadata"]["name"] == "policys.example.com"  # the rule is simple: check it
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"] == {"kind": "Policy", "listKind": "PolicyList",
                                    "plural": "policys", "singular": "policy"}
    [version] = crd["spec"]["versions"]
    assert "subresources" not in version and "additionalPrinterColumns" not in version
    ident = Policy.identity()
    assert ident.resource == wk.Resource("example.com", "v1", "Policy", "policys", False)
    assert (ident.crd_name, ident.api_version) == ("policys.example.com", "example.com/v1")


def test_explicit_names() -> None:
    @wk.custom_resource(group="example.com", version="v1alpha1", kind="NetPolicy",
                        plural="netpolicies", singular="netpolicy", list_kind="NetPolicies",
                        status_subresource=True)
    class Anything(wk.CustomResource):
        spec: Spec

    crd = wk.crd(Anything)
    assert crd["spec"]["names"] == {"kind": "NetPolicy", "listKind": "NetPolicies",
                                    "plural": "netpolicies", "singular": "netpolicy"}
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group": "example"}, r"group 'example' must be a DNS subdomain with a dot"),
    ({"group": "Example.com"}, "group 'Example.com'"),
    ({"version": "V1"}, "version 'V1' must be a DNS label"),
    ({"kind": "website"}, "kind 'website' must be CamelCase"),
    ({"plural": "Websites"}, "plural 'Websites' must be a lowercase DNS label"),
    ({"short_names": ["w s"]}, "short name 'w s'"),
    ({"categories": ["All"]}, "category 'All'"),
    ({"scope": "Global"}, "scope 'Global' must be Namespaced or Cluster"),
    ({"deprecation_warning": "old"}, "deprecation_warning needs deprecated=True"),
    ({"served": False, "storage": True}, "a storage version that is not served"),
    ({"printer_columns": [wk.PrinterColumn("X", "spec.size")]}, "json_path must start with"),
])
def test_identity_mistakes_are_refused_when_declared(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(wk.SchemaError, match=message):
        wk.custom_resource(**{"group": "example.com", "version": "v1", **kwargs})(
            type("Site", (wk.CustomResource,), {"__annotations__": {"spec": Spec}}))


def test_only_a_custom_resource_can_be_named_or_made_a_crd() -> None:
    with pytest.raises(wk.SchemaError, match=r"decorates a subclass of wk\.CustomResource"):
        wk.custom_resource(group="example.com", version="v1")(Spec)  # type: ignore[type-var]

    class Nameless(wk.CustomResource):
        spec: Spec

    with pytest.raises(wk.SchemaError, match="Nameless has no identity: decorate it"):
        wk.crd(Nameless)
    with pytest.raises(wk.SchemaError, match=r"is not a wk\.CustomResource class"):
        wk.crd(Spec)  # type: ignore[arg-type]


# -- versions ---------------------------------------------------------------------------------


def _version(version: str, **kw: Any) -> type[wk.CustomResource]:
    sub = type(f"Thing{version}", (wk.CustomResource,), {"__annotations__": {"spec": Spec}})
    return wk.custom_resource(group="example.com", version=version, kind="Thing", **kw)(sub)


def test_versions_of_one_resource_merge_with_one_storage_version() -> None:
    v1 = _version("v1", deprecated=True, deprecation_warning="example.com/v1 Thing is old")
    v2 = _version("v2", storage=True)
    v3 = _version("v3alpha1", served=False)
    crd = wk.crd(v1, v2, v3)
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1", True, False), ("v2", True, True), ("v3alpha1", False, False)]
    assert crd["spec"]["versions"][0]["deprecated"] is True
    assert crd["spec"]["versions"][0]["deprecationWarning"] == "example.com/v1 Thing is old"
    assert "deprecated" not in crd["spec"]["versions"][1]
    # crds() groups classes by resource, in the order first named
    assert [c["metadata"]["name"] for c in wk.crds(Policy, v1, Website, v2)] == [
        "policys.example.com", "things.example.com", "websites.example.com"]
    assert wk.crds(Policy, v1, Website, v2)[1] == wk.crd(v1, v2)


@pytest.mark.parametrize(("versions", "message"), [
    (lambda: (_version("v1"), _version("v2")), "exactly one version must be the storage"),
    (lambda: (_version("v1", storage=True), _version("v2", storage=True)), "got 2"),
    (lambda: (_version("v1", storage=True), _version("v1")), r"version names repeat"),
    (lambda: (_version("v1", storage=True), Policy), "is not a version of things.example.com: "
     "its kind, plural, singular, list_kind, scope differ"),
    (lambda: (), "at least one"),
])
def test_version_mistakes(versions: Any, message: str) -> None:
    with pytest.raises(wk.SchemaError, match=message):
        wk.crd(*versions())


# -- printer columns and the scale subresource ----------------------------------------------


class Status(wk.Schema):
    ready: int = 0
    since: datetime | None = None
    labels: dict[str, str] = {}


class Scaled(wk.Schema):
    replicas: Annotated[int, msgspec.Meta(description="Wanted.\n\nMore words.")] = 1
    name: str = ""
    ratio: float = 1.0
    on: bool = True
    config: dict[str, Any] = {}


def _resource(**kw: Any) -> type[wk.CustomResource]:
    sub = type("Scaler", (wk.CustomResource,), {"__annotations__": {
        "spec": Scaled, "status": Status | None}, "status": None})
    return wk.custom_resource(group="example.com", version="v1", **kw)(sub)


def test_printer_column_types_come_from_the_schema() -> None:
    cls = _resource(printer_columns=[
        wk.PrinterColumn("R", ".spec.replicas"), wk.PrinterColumn("Ratio", ".spec.ratio"),
        wk.PrinterColumn("On", ".spec.on"), wk.PrinterColumn("Since", ".status.since"),
        wk.PrinterColumn("Team", ".status.labels.team"),
        wk.PrinterColumn("Deep", ".spec.config.a.b"),
        wk.PrinterColumn("Named", ".metadata.name"),
        wk.PrinterColumn("Given", ".spec.name", type="integer", description="mine",
                         format="int32", priority=2),
    ])
    columns = wk.crd(cls)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["type"], c.get("description")) for c in columns] == [
        ("R", "integer", "Wanted."),  # the first paragraph of the field's description
        ("Ratio", "number", None), ("On", "boolean", None), ("Since", "date", None),
        ("Team", "string", None), ("Deep", "string", None), ("Named", "string", None),
        ("Given", "integer", "mine")]
    assert columns[-1] == {"name": "Given", "type": "integer", "jsonPath": ".spec.name",
                           "description": "mine", "format": "int32", "priority": 2}


def test_a_printer_column_on_a_missing_field_is_refused() -> None:
    cls = _resource(printer_columns=[wk.PrinterColumn("R", ".spec.replica")])
    with pytest.raises(wk.SchemaError, match=r"printer column 'R': '.spec.replica' is not a "
                                             "field of the schema"):
        wk.crd(cls)
    cls = _resource(printer_columns=[wk.PrinterColumn("R", ".spec.nope[0]")])
    with pytest.raises(wk.SchemaError, match=r"'\.spec\.nope' is not a field"):
        wk.crd(cls)


def test_scale_subresource_paths_are_checked() -> None:
    ok = wk.crd(_resource(scale=wk.Scale(status_replicas_path=".status.ready",
                                         label_selector_path=".spec.name")))
    assert ok["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.ready",
        "labelSelectorPath": ".spec.name"}
    for scale, message in [
        (wk.Scale(), "statusReplicasPath '.status.replicas' is not a field"),
        (wk.Scale(spec_replicas_path=".status.ready", status_replicas_path=".status.ready"),
         "specReplicasPath '.status.ready' must be under .spec."),
        (wk.Scale(spec_replicas_path=".spec.name", status_replicas_path=".status.ready"),
         "specReplicasPath '.spec.name' must be of type integer, not string"),
        (wk.Scale(status_replicas_path=".status.ready", label_selector_path=".metadata.x"),
         "labelSelectorPath '.metadata.x' must be under .spec or .status"),
    ]:
        with pytest.raises(wk.SchemaError, match=message):
            wk.crd(_resource(scale=scale))
