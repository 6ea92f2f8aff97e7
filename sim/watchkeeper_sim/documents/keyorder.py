"""Key order as kube-apiserver encodes objects, so responses read byte-for-byte like the pack.

Built-in types go through Go structs: fields in declaration order, map-typed fields (labels,
annotations, ConfigMap data, schema properties) sorted by key (097-099, 106, 111: ``data``
comes back sorted whatever order the request used). Custom resources are unstructured maps,
which encoding/json writes with every key sorted, at every level (140-146, 138's list).
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

# map[string]string fields of built-in objects, by top-level key (metadata ones for every type)
_SORTED_META = ("labels", "annotations")
_SORTED_TOP = ("data", "binaryData", "stringData")

# ObjectMeta and its nested structs, in declaration order
META_ORDER = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
              "generation", "creationTimestamp", "deletionTimestamp",
              "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
              "finalizers", "managedFields")
_MANAGED_ENTRY = ("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1",
                  "subresource")
_OWNER_REF = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")

# apiextensions/v1 struct field orders (types.go), for CustomResourceDefinition bodies (136-137)
_CRD_SPEC = ("group", "names", "scope", "versions", "conversion", "preserveUnknownFields")
_CRD_NAMES = ("plural", "singular", "shortNames", "kind", "listKind", "categories")
_CRD_VERSION = ("name", "served", "storage", "deprecated", "deprecationWarning", "schema",
                "subresources", "additionalPrinterColumns", "selectableFields")
_CRD_STATUS = ("conditions", "acceptedNames", "storedVersions")
_CONDITION = ("type", "status", "lastTransitionTime", "reason", "message")
_COLUMN = ("name", "type", "format", "description", "priority", "jsonPath")
_SUBRESOURCES = ("status", "scale")
_SCALE = ("specReplicasPath", "statusReplicasPath", "labelSelectorPath")
_CONVERSION = ("strategy", "webhook")
# core/v1 Service (types.go), for the defaults and allocations the registry adds (issue 22)
_SERVICE_SPEC = ("ports", "selector", "clusterIP", "clusterIPs", "type", "externalIPs",
                 "sessionAffinity", "loadBalancerIP", "loadBalancerSourceRanges",
                 "externalName", "externalTrafficPolicy", "healthCheckNodePort",
                 "publishNotReadyAddresses", "sessionAffinityConfig", "ipFamilies",
                 "ipFamilyPolicy", "allocateLoadBalancerNodePorts", "loadBalancerClass",
                 "internalTrafficPolicy")
_SERVICE_PORT = ("name", "protocol", "appProtocol", "port", "targetPort", "nodePort")
_SCHEMA = (
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations",
)


def _ordered(obj: Any, order: tuple[str, ...]) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = {k: obj[k] for k in order if k in obj}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def _sorted_map(value: Any) -> Any:
    return {k: value[k] for k in sorted(value)} if isinstance(value, dict) else value


def sort_object(obj: JSON) -> JSON:
    """A whole unstructured object (a custom resource) with every key sorted."""
    return {k: sort_all(obj[k]) for k in sorted(obj)}


def sort_all(value: Any) -> Any:
    """Every mapping's keys sorted, recursively: how an unstructured object is encoded."""
    if isinstance(value, dict):
        return {k: sort_all(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_all(v) for v in value]
    return value


def object_meta(meta: Any) -> Any:
    """ObjectMeta in struct order, e.g. a custom resource's metadata shown as the typed
    PartialObjectMetadata of a Table row (150), where the object itself had sorted keys."""
    out = _ordered(meta, META_ORDER)
    if not isinstance(out, dict):
        return out
    if isinstance(out.get("managedFields"), list):
        out["managedFields"] = [_ordered(e, _MANAGED_ENTRY) for e in out["managedFields"]]
    if isinstance(out.get("ownerReferences"), list):
        out["ownerReferences"] = [_ordered(r, _OWNER_REF) for r in out["ownerReferences"]]
    return out


def _schema(props: Any) -> Any:
    """JSONSchemaProps: struct order, with its map-typed members sorted."""
    if not isinstance(props, dict):
        return props
    out = _ordered(props, _SCHEMA)
    for key in ("properties", "patternProperties", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {k: _schema(v) for k, v in sorted(out[key].items())}
    for key in ("not", "additionalProperties", "additionalItems"):
        if isinstance(out.get(key), dict):
            out[key] = _schema(out[key])
    items = out.get("items")
    if isinstance(items, dict):
        out["items"] = _schema(items)
    elif isinstance(items, list):
        out["items"] = [_schema(i) for i in items]
    for key in ("allOf", "oneOf", "anyOf"):
        if isinstance(out.get(key), list):
            out[key] = [_schema(i) for i in out[key]]
    return out


def _crd_version(version: Any) -> Any:
    out = _ordered(version, _CRD_VERSION)
    if not isinstance(out, dict):
        return out
    schema = out.get("schema")
    if isinstance(schema, dict) and "openAPIV3Schema" in schema:
        out["schema"] = {**schema, "openAPIV3Schema": _schema(schema["openAPIV3Schema"])}
    subresources = out.get("subresources")
    if isinstance(subresources, dict):
        subresources = _ordered(subresources, _SUBRESOURCES)
        if "scale" in subresources:
            subresources["scale"] = _ordered(subresources["scale"], _SCALE)
        out["subresources"] = subresources
    if isinstance(out.get("additionalPrinterColumns"), list):
        out["additionalPrinterColumns"] = [_ordered(c, _COLUMN)
                                           for c in out["additionalPrinterColumns"]]
    return out


def _crd(obj: JSON) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec = _ordered(spec, _CRD_SPEC)
        if "names" in spec:
            spec["names"] = _ordered(spec["names"], _CRD_NAMES)
        if "conversion" in spec:
            spec["conversion"] = _ordered(spec["conversion"], _CONVERSION)
        if isinstance(spec.get("versions"), list):
            spec["versions"] = [_crd_version(v) for v in spec["versions"]]
        obj["spec"] = spec
    status = obj.get("status")
    if isinstance(status, dict):
        status = _ordered(status, _CRD_STATUS)
        if isinstance(status.get("conditions"), list):
            status["conditions"] = [_ordered(c, _CONDITION) for c in status["conditions"]]
        if "acceptedNames" in status:
            status["acceptedNames"] = _ordered(status["acceptedNames"], _CRD_NAMES)
        obj["status"] = status


def _service(obj: JSON) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec = _ordered(spec, _SERVICE_SPEC)
        if isinstance(spec.get("ports"), list):
            spec["ports"] = [_ordered(p, _SERVICE_PORT) for p in spec["ports"]]
        if "selector" in spec:
            spec["selector"] = _sorted_map(spec["selector"])
        obj["spec"] = spec


def canonical(obj: JSON, group: str, plural: str) -> JSON:
    """A built-in ``obj`` (modified in place and returned) with keys in the encoder's order.
    Custom resources are sorted on the way out instead (``sort_all``), since the simulator
    keeps their metadata in struct order for Table and metadata-only views."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in _SORTED_META:
            if key in meta:
                meta[key] = _sorted_map(meta[key])
    for key in _SORTED_TOP:
        if key in obj:
            obj[key] = _sorted_map(obj[key])
    if (group, plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
        _crd(obj)
    elif (group, plural) == ("", "services"):
        _service(obj)
    return obj
