"""CustomResourceDefinitions: structural schemas (defaulting, pruning, validation, CEL),
the status and scale subresources, generation, printer columns, versions, deletion."""

from __future__ import annotations

from typing import Any

from conformance.steps import (
    PRESENT,
    TABLE,
    Poll,
    Scenario,
    Step,
    delete,
    get,
    gone,
    kubectl,
    patch,
    post,
    put,
)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LABELS = {"watchkeeper.dev/conformance": "yes"}
S = dict[str, Any]


def obj(**props: Any) -> S:
    """An object schema with these properties."""
    return {"type": "object", "properties": props}


STR: S = {"type": "string"}
INT: S = {"type": "integer"}


def crd(plural: str, kind: str, spec: S | None = None, *, status: S | None = None,
        scope: str = "Namespaced", subresources: S | None = None,
        columns: list[S] | None = None, root: S | None = None,
        versions: list[S] | None = None) -> S:
    """A CRD in the scenario's group, served as v1 (or ``versions``)."""
    schema = root or obj(spec=spec or {"type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True},
                         status=status or {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True})
    version: S = {"name": "v1", "served": True, "storage": True,
                  "schema": {"openAPIV3Schema": schema}}
    if subresources:
        version["subresources"] = subresources
    if columns:
        version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{{group}}", "labels": LABELS},
        "spec": {"group": "{group}", "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": versions or [version]},
    }


def install(definition: S, *, record: bool = False) -> list[Step]:
    """Create the CRD and wait until it is served and discoverable (a cluster takes a
    moment: Established, then the handler and the discovery document)."""
    plural = definition["spec"]["names"]["plural"]
    version = definition["spec"]["versions"][0]["name"]
    scoped = definition["spec"]["scope"] == "Namespaced"
    served = f"/apis/{{group}}/{version}" + ("/namespaces/{ns}" if scoped else "") + f"/{plural}"
    return [
        post(CRDS, definition, pick=() if record else ("metadata.name",)),
        Poll(served, record=False),
        Poll(f"/apis/{{group}}/{version}", record=False),
    ]


def cr(plural: str, name: str = "", *, version: str = "v1", sub: str = "") -> str:
    path = f"/apis/{{group}}/{version}/namespaces/{{ns}}/{plural}" + (f"/{name}" if name else "")
    return path + (f"/{sub}" if sub else "")


def widget(name: str, spec: Any = None, *, kind: str = "Widget", version: str = "v1",
           **extra: Any) -> S:
    body: S = {"apiVersion": f"{{group}}/{version}", "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        body["spec"] = spec
    body.update(extra)
    return body


# ---- schemas --------------------------------------------------------------------------

DEFAULTS = obj(
    replicas={"type": "integer", "default": 1},
    mode={"type": "string", "default": "auto"},
    limits={"type": "object", "default": {},
            "properties": {"cpu": {"type": "string", "default": "100m"}, "memory": STR}},
    ports={"type": "array", "items": obj(
        name=STR, port=INT, protocol={"type": "string", "default": "TCP"})},
    tags={"type": "array", "items": STR, "default": ["a"]},
    nested=obj(inner={"type": "object", "default": {"level": "x"},
                      "properties": {"level": STR,
                                     "depth": {"type": "integer", "default": 3}}}),
    keep={"type": "string", "nullable": True, "default": "k"},
)

PRUNING = obj(
    known=STR,
    sub=obj(a=STR),
    free={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    embedded={"type": "object", "x-kubernetes-embedded-resource": True,
              "x-kubernetes-preserve-unknown-fields": True},
    typedEmbedded={"type": "object", "x-kubernetes-embedded-resource": True,
                   "properties": {"data": {"type": "object",
                                           "additionalProperties": STR}}},
    anyValue={"x-kubernetes-preserve-unknown-fields": True},
    mapOf={"type": "object", "additionalProperties": obj(x=INT)},
)

STRINGS = obj(
    code={"type": "string", "pattern": "^[a-z]+-[0-9]+$"},
    color={"type": "string", "enum": ["red", "green"]},
    short={"type": "string", "minLength": 2, "maxLength": 4},
    when={"type": "string", "format": "date-time"},
    mail={"type": "string", "format": "email"},
    addr={"type": "string", "format": "ipv4"},
    id={"type": "string", "format": "uuid"},
    blob={"type": "string", "format": "byte"},
)

NUMBERS = obj(
    count={"type": "integer", "minimum": 1, "maximum": 10},
    ratio={"type": "number", "exclusiveMinimum": True, "minimum": 0,
           "exclusiveMaximum": True, "maximum": 1},
    step={"type": "integer", "multipleOf": 5},
    small={"type": "integer", "format": "int32"},
    whole=INT,
)

STRUCTURE = {
    "type": "object", "required": ["name", "items"], "maxProperties": 6,
    "properties": {
        "name": STR,
        "items": {"type": "array", "minItems": 1, "maxItems": 2, "items": STR},
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": STR},
        "map": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["key"],
                "items": {"type": "object", "required": ["key"],
                          "properties": {"key": STR, "value": STR}}},
        "labels": {"type": "object", "minProperties": 1, "additionalProperties": STR},
        "maybe": {"type": "object", "nullable": True, "properties": {"x": STR}},
        "never": obj(x=STR),
    },
}

INT_OR_STRING = obj(
    port={"x-kubernetes-int-or-string": True},
    # what controller-gen writes for an IntOrString field, with a pattern for the string
    percent={"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+%$",
             "anyOf": [{"type": "integer"}, {"type": "string"}]},
)

CEL = {
    **obj(
        min=INT, max=INT,
        name={"type": "string", "maxLength": 20,
              "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                            "message": "name is immutable"}]},
        # string(self) would be refused: its estimated cost exceeds the budget
        size={"type": "integer", "x-kubernetes-validations": [{
            "rule": "self % 2 == 0",
            "messageExpression": "'size is ' + (self > 100 ? 'large and odd' : 'odd')"}]},
    ),
    "x-kubernetes-validations": [
        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
        {"rule": "!has(self.name) || self.name.startsWith('w')",
         "fieldPath": ".name", "reason": "FieldValueForbidden"},
    ],
}

SCALED = obj(replicas=INT, selector=STR)
SCALED_STATUS = obj(replicas=INT, selector=STR, ready=STR)

COLUMNS = [
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "description": "paint"},
    {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Detail", "type": "string", "jsonPath": ".spec.detail", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
COLUMNS_SPEC = obj(replicas=INT, color=STR, on={"type": "boolean"}, ratio={"type": "number"},
                   detail=STR)


def _versions() -> list[S]:
    schema = {"openAPIV3Schema": obj(spec=obj(size=INT), status={
        "type": "object", "x-kubernetes-preserve-unknown-fields": True})}
    return [
        {"name": "v1", "served": True, "storage": True, "schema": schema},
        {"name": "v2", "served": True, "storage": False, "schema": schema},
        {"name": "v1beta1", "served": True, "storage": False, "deprecated": True,
         "deprecationWarning": "{group}/v1beta1 Widget is going away", "schema": schema},
        {"name": "v0", "served": False, "storage": False, "schema": schema},
    ]


SCENARIOS = [
    Scenario("crd-create-discovery", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT)) | {}, record=True),
        get(f"{CRDS}/widgets.{{group}}", pick=("spec", "status.acceptedNames")),
        Poll(f"{CRDS}/widgets.{{group}}", field="status.conditions.1.status", value="True",
             pick=("status.conditions",)),
        get("/apis/{group}/v1"),
        get("/apis/{group}"),
        kubectl("get", "crd", "widgets.{group}"),
    )),
    Scenario("crd-invalid-definitions", "crds", (
        post(CRDS, crd("nontypes", "Nontype", root=obj(spec={"properties": {"a": STR}}))),
        # one bad default per CRD: a cluster lists the causes of one schema in map order
        post(CRDS, crd("badtypes", "Badtype", obj(n={"type": "integer", "default": "one"}))),
        post(CRDS, crd("badenums", "Badenum",
                       obj(s={"type": "string", "enum": ["a"], "default": "b"}))),
        post(CRDS, crd("metas", "Meta", root=obj(metadata=obj(labels=obj()), spec=obj()))),
        post(CRDS, crd("emptyschemas", "Emptyschema", root={"type": "object"})
             | {"metadata": {"name": "wrong.{group}"}}),
        post(CRDS, crd("nonames", "Noname", obj(a=STR)) | {"spec": {
            "group": "{group}", "scope": "Sideways", "names": {"plural": "nonames"},
            "versions": []}}),
    ), differs="a CRD's schema is not checked (a non-structural schema, a default that "
       "breaks it, constraints on metadata are accepted), and a refused CRD "
       "lists other causes (versions, names.singular)"),
    Scenario("crd-defaulting", "crds", (
        *install(crd("widgets", "Widget", DEFAULTS)),
        post(cr("widgets"), widget("w1", {"ports": [{"name": "a", "port": 80}],
                                          "nested": {}, "keep": None}), name="w1"),
        post(cr("widgets"), widget("w2", {"limits": None, "nested": {"inner": {}}})),
        post(cr("widgets"), widget("w3")),
        put(cr("widgets", "w1"), widget("w1", {"mode": "manual"}) | {
            "metadata": {"name": "w1", "resourceVersion": "{rv:w1}"}}),
        get(cr("widgets", "w1")),
        kubectl("apply", "-f", "-", stdin=(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w4\n"
            "spec:\n  replicas: 5\n")),
        kubectl("get", "widgets.{group}", "w4", "-o", "json"),
    )),
    Scenario("crd-default-on-read", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT))),
        post(cr("widgets"), widget("w1", {"size": 1})),
        patch(f"{CRDS}/widgets.{{group}}", [{
            "op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
            "properties/color", "value": {"type": "string", "default": "blue"}}], "json",
            pick=("metadata.generation",)),
        Poll(cr("widgets", "w1"), field="spec.color", value="blue"),
        post(cr("widgets"), widget("w2", {"size": 2})),
    ), differs="defaults are applied when an object is written, not when one stored "
       "before the default was added is read"),
    Scenario("crd-pruning", "crds", (
        *install(crd("widgets", "Widget", PRUNING)),
        post(cr("widgets"), widget("w1", {
            "known": "k", "unknown": "u", "sub": {"a": "a", "b": "b"},
            "free": {"anything": {"goes": [1, 2]}},
            "embedded": {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "e", "bogus": "x", "labels": {"a": "b"}},
                         "data": {"k": "v"}},
            "typedEmbedded": {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "t"}, "data": {"k": "v"}, "extra": 1},
            "anyValue": [1, "two", {"three": 3}],
            "mapOf": {"one": {"x": 1, "y": 2}},
        }, extra="top-level")),
        post(cr("widgets"), widget("w2", {"known": "k", "unknown": "u"}),
             fieldValidation="Strict"),
        post(cr("widgets"), widget("w3", {"known": "k", "unknown": "u", "sub": {"b": 1}}),
             fieldValidation="Ignore"),
        post(cr("widgets"), widget("w4", {"embedded": {"kind": "ConfigMap"}})),
        post(cr("widgets"), widget("w5", {"typedEmbedded": {"apiVersion": "v1"}})),
        post(cr("widgets"), widget("w6", {"embedded": {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}}})),
        kubectl("create", "-f", "-", stdin=(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w7\n"
            "spec:\n  known: k\n  unknown: u\n")),
    )),
    # One invalid value per request: a cluster lists the causes of one object in the order
    # it walks a Go map, which changes from run to run.
    Scenario("crd-validation-strings", "crds", (
        *install(crd("widgets", "Widget", STRINGS)),
        post(cr("widgets"), widget("good", {
            "code": "ab-12", "color": "red", "short": "abc", "when": "2024-01-02T03:04:05Z",
            "mail": "a@b.example", "addr": "10.0.0.1",
            "id": "0b8e3c7a-1d2f-4e5a-9b6c-7d8e9f0a1b2c", "blob": "aGVsbG8="})),
        *(post(cr("widgets"), widget(f"bad-{i}", {key: value})) for i, (key, value) in
          enumerate([("code", "AB_12"), ("color", "blue"), ("short", "a"),
                     ("short", "abcde"), ("when", "yesterday"), ("mail", "nobody"),
                     ("addr", "10.0.0.300"), ("id", "nope"), ("blob", "%%%"),
                     ("code", 5), ("color", None)])),
    )),
    Scenario("crd-validation-numbers", "crds", (
        *install(crd("widgets", "Widget", NUMBERS)),
        post(cr("widgets"), widget("good", {"count": 10, "ratio": 0.5, "step": 15,
                                            "small": 2147483648, "whole": 1.0})),
        *(post(cr("widgets"), widget(f"bad-{i}", {key: value})) for i, (key, value) in
          enumerate([("count", 0), ("count", 11), ("ratio", 0), ("ratio", 1), ("step", 7),
                     ("whole", 1.5), ("count", "5"), ("ratio", "half"),
                     ("whole", 9223372036854775808)])),
    )),
    Scenario("crd-validation-structure", "crds", (
        *install(crd("widgets", "Widget", STRUCTURE)),
        post(cr("widgets"), widget("good", {
            "name": "n", "items": ["a"], "set": ["x", "y"],
            "map": [{"key": "a", "value": "1"}, {"key": "b"}], "labels": {"a": "b"},
            "maybe": None})),
        *(post(cr("widgets"), widget(f"bad-{i}", {"name": "n", "items": ["a"], **spec}))
          for i, spec in enumerate([
              {"name": None}, {"items": []}, {"items": ["a", "b", "c"]},
              {"set": ["x", "x"]}, {"map": [{"key": "a"}, {"key": "a"}]},
              {"map": [{"value": "v"}]}, {"labels": {}}, {"never": None},
              {"never": "x"}, {"name": ["n"]},
              {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}])),
        post(cr("widgets"), widget("spec-type", "not-an-object")),
    )),
    Scenario("crd-int-or-string", "crds", (
        *install(crd("widgets", "Widget", INT_OR_STRING)),
        post(cr("widgets"), widget("int", {"port": 80, "percent": 5})),
        post(cr("widgets"), widget("str", {"port": "http", "percent": "50%"})),
        post(cr("widgets"), widget("bool", {"port": True})),
        post(cr("widgets"), widget("pattern", {"percent": "half"})),
        post(cr("widgets"), widget("float", {"port": 1.5})),
        post(cr("widgets"), widget("list", {"percent": [1]})),
    ), differs="anyOf, allOf, oneOf and not are not evaluated: an int-or-string with a "
       "pattern reports one cause where a cluster reports three"),
    Scenario("crd-cel-rules", "crds", (
        *install(crd("widgets", "Widget", CEL)),
        post(cr("widgets"), widget("w1", {"min": 1, "max": 2, "name": "wa", "size": 2}),
             name="w1"),
        post(cr("widgets"), widget("w2", {"min": 3, "max": 2})),
        post(cr("widgets"), widget("w3", {"min": 1, "max": 2, "size": 3})),
        post(cr("widgets"), widget("w4", {"min": 1, "max": 2, "name": "xa"})),
        patch(cr("widgets", "w1"), {"spec": {"name": "wb"}}),
        patch(cr("widgets", "w1"), {"spec": {"min": 9}}),
        patch(cr("widgets", "w1"), {"spec": {"size": 4}}, pick=("spec",)),
    )),
    Scenario("crd-status-subresource", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT), status=obj(phase=STR, seen=INT),
                     subresources={"status": {}})),
        post(cr("widgets"), widget("w1", {"size": 1}, status={"phase": "Ignored"}),
             name="w1"),
        put(cr("widgets", "w1", sub="status"),
            widget("w1", {"size": 99}, status={"phase": "Ready", "seen": 1})
            | {"metadata": {"name": "w1", "resourceVersion": "{rv:w1}",
                            "labels": {"ignored": "yes"}}}, name="status1"),
        put(cr("widgets", "w1"), widget("w1", {"size": 2}, status={"phase": "Gone"})
            | {"metadata": {"name": "w1", "resourceVersion": "{rv:status1}"}}),
        put(cr("widgets", "w1"), widget("w1", {"size": 3})),
        patch(cr("widgets", "w1"), {"metadata": {"labels": {"a": "b"}}}),
        patch(cr("widgets", "w1", sub="status"), {"status": {"seen": 2}, "spec": {"size": 7}}),
        get(cr("widgets", "w1", sub="status")),
        patch(cr("widgets", "w1", sub="status"), {"status": {"seen": "two"}}),
        get(cr("widgets", "w1", sub="scale")),
        get(cr("widgets", "w1"), pick=("metadata.generation", "spec", "status")),
    )),
    Scenario("crd-scale-subresource", "crds", (
        *install(crd("widgets", "Widget", SCALED, status=SCALED_STATUS, subresources={
            "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                    "statusReplicasPath": ".status.replicas",
                                    "labelSelectorPath": ".status.selector"}})),
        post(cr("widgets"), widget("w1", {"replicas": 2})),
        get(cr("widgets", "w1", sub="scale")),
        patch(cr("widgets", "w1", sub="status"), {"status": {"replicas": 2,
                                                             "selector": "app=w1"}},
              pick=("status",)),
        patch(cr("widgets", "w1", sub="scale"), {"spec": {"replicas": 5}}),
        put(cr("widgets", "w1", sub="scale"), {
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "w1"}, "spec": {"replicas": -1}}),
        kubectl("scale", "widgets.{group}/w1", "--replicas=3"),
        get(cr("widgets", "w1"), pick=("metadata.generation", "spec", "status")),
    )),
    Scenario("crd-generation", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT), status=obj(phase=STR))),
        post(cr("widgets"), widget("w1", {"size": 1}), pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"metadata": {"labels": {"a": "b"}}},
              pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"metadata": {"annotations": {"a": "b"}}},
              pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"status": {"phase": "Ready"}},
              pick=("metadata.generation", "status")),
        patch(cr("widgets", "w1"), {"spec": {"size": 1}}, pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"spec": {"size": 2}}, pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"metadata": {"finalizers": ["diff.example.com/x"]}},
              pick=("metadata.generation",)),
        delete(cr("widgets", "w1"), pick=("metadata.generation",)),
        patch(cr("widgets", "w1"), {"metadata": {"finalizers": None}},
              pick=("metadata.generation",)),
    )),
    Scenario("crd-printer-columns", "crds", (
        *install(crd("widgets", "Widget", COLUMNS_SPEC, status=obj(phase=STR),
                     columns=COLUMNS)),
        post(cr("widgets"), widget("w1", {"replicas": 3, "color": "red", "on": True,
                                          "ratio": 0.25, "detail": "d1"},
                                   status={"phase": "Ready"}), pick=("metadata.name",)),
        post(cr("widgets"), widget("w2", {}), pick=("metadata.name",)),
        kubectl("get", "widgets.{group}"),
        kubectl("get", "widgets.{group}", "-o", "wide"),
        get(cr("widgets"), accept=TABLE),
        get(cr("widgets", "w1"), accept=TABLE, includeObject="None"),
    )),
    Scenario("crd-printer-column-filter", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT), status=obj(conditions={
            "type": "array", "items": obj(type=STR, status=STR)}), columns=[
                {"name": "Ready", "type": "string",
                 "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}])),
        post(cr("widgets"), widget("w1", {"size": 1}, status={"conditions": [
            {"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}),
             pick=("metadata.name",)),
        kubectl("get", "widgets.{group}"),
        get(cr("widgets"), accept=TABLE, includeObject="None"),
    )),
    Scenario("crd-versions", "crds", (
        *install(crd("widgets", "Widget", versions=_versions())),
        post(cr("widgets"), widget("w1", {"size": 1}), pick=("apiVersion", "spec")),
        get(cr("widgets", "w1", version="v2"), pick=("apiVersion", "kind", "spec")),
        get(cr("widgets", "w1", version="v1beta1"), pick=("apiVersion", "spec")),
        get(cr("widgets", "w1", version="v0")),
        get(f"{CRDS}/widgets.{{group}}", pick=("status.storedVersions",)),
        get("/apis/{group}"),
    )),
    Scenario("crd-cluster-scoped", "crds", (
        *install(crd("gadgets", "Gadget", obj(size=INT), scope="Cluster")),
        post("/apis/{group}/v1/gadgets", {"apiVersion": "{group}/v1", "kind": "Gadget",
                                          "metadata": {"name": "{ns}-g1",
                                                       "namespace": "ignored"},
                                          "spec": {"size": 1}}),
        get("/apis/{group}/v1/namespaces/{ns}/gadgets"),
        kubectl("get", "gadgets.{group}"),
        delete("/apis/{group}/v1/gadgets/{ns}-g1"),
    )),
    Scenario("crd-deletion-with-finalizers", "crds", (
        *install(crd("widgets", "Widget", obj(size=INT))),
        post(cr("widgets"), widget("w1", {"size": 1})
             | {"metadata": {"name": "w1", "finalizers": ["diff.example.com/hold"]}},
             pick=("metadata.finalizers",)),
        post(cr("widgets"), widget("w2", {"size": 2}), pick=("metadata.name",)),
        delete(f"{CRDS}/widgets.{{group}}",
               pick=("metadata.deletionTimestamp", "metadata.finalizers")),
        Poll(cr("widgets", "w1"), field="metadata.deletionTimestamp", value=PRESENT,
             pick=("metadata.deletionTimestamp", "metadata.finalizers")),
        Poll(f"{CRDS}/widgets.{{group}}", field="status.conditions.2.type",
             value="Terminating", pick=("status.conditions",)),
        post(cr("widgets"), widget("w3", {"size": 3})),
        gone(cr("widgets", "w2")),
        patch(cr("widgets", "w1"), {"metadata": {"finalizers": None}},
              pick=("metadata.finalizers",)),
        gone(f"{CRDS}/widgets.{{group}}"),
        get(cr("widgets")),
    )),
]
