"""Value checks the apiserver's validation runs on every object: labels, annotation keys,
owner references, ConfigMap/Secret data keys, workloads' replica counts. Returned as 422
causes so the registry can report them together with the name's (file 091: one message,
causes in brackets, in ValidateObjectMeta's order).
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ResourceType

_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")

_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_QUALIFIED_MSG = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
    "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
    "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def qualified_name_errors(value: str) -> list[str]:
    """apimachinery IsQualifiedName (label and annotation keys)."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253:
            return ["prefix part must be no more than 253 characters"]
        if not SUBDOMAIN.fullmatch(prefix):
            return ["prefix part " + SUBDOMAIN_MSG]
    else:
        return [_QUALIFIED_MSG]
    if not name:
        return ["name part must be non-empty"]
    errs = []
    if len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _NAME_PART.fullmatch(name):
        errs.append(_NAME_PART_MSG)
    return errs


def _label_value_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def _config_key_errors(key: str) -> list[str]:
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        errs.append(_CONFIG_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _invalid(field: str, value: str, errors: list[str]) -> list[JSON]:
    return [_status.cause("FieldValueInvalid", f"Invalid value: {_quote(value)}: {e}", field)
            for e in errors]


def _strings(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def metadata_causes(obj: JSON) -> list[JSON]:
    """ValidateObjectMeta's label and annotation checks (after the name's, file 091)."""
    meta = _strings(obj.get("metadata"))
    causes: list[JSON] = []
    for key, value in _strings(meta.get("labels")).items():
        causes += _invalid("metadata.labels", key, qualified_name_errors(key))
        if isinstance(value, str):
            causes += _invalid("metadata.labels", value, _label_value_errors(value))
    for key in _strings(meta.get("annotations")):
        causes += _invalid("metadata.annotations", key, qualified_name_errors(key.lower()))
    return causes


# ---- owner references (ValidateOwnerReferences) ---------------------------------------------

# How many times an update repeats each owner-reference cause: the kind's ValidateUpdate runs
# ValidateObjectMeta and/or ValidateObjectMetaUpdate, then the registry runs both again
# (kube-apiserver 1.28, measured per kind; issue 22). A create reports it once.
_UPDATE_COPIES = {("", "Event"): 2, ("apps", "Deployment"): 3, ("apps", "StatefulSet"): 3,
                  ("batch", "CronJob"): 3, ("coordination.k8s.io", "Lease"): 3,
                  ("events.k8s.io", "Event"): 3, ("apiextensions.k8s.io",
                                                  "CustomResourceDefinition"): 3,
                  ("flowcontrol.apiserver.k8s.io", "FlowSchema"): 3,
                  ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): 3}
_RBAC_COPIES = 5
_CUSTOM_COPIES = 3
_DEFAULT_COPIES = 4


def update_copies(rt: ResourceType) -> int:
    """How many copies of each owner-reference cause an update of ``rt`` reports."""
    if rt.is_custom:
        return _CUSTOM_COPIES
    if rt.group == "rbac.authorization.k8s.io":
        return _RBAC_COPIES
    return _UPDATE_COPIES.get((rt.group, rt.kind), _DEFAULT_COPIES)


def _version_of(api_version: str) -> str:
    """schema.ParseGroupVersion's version ("" when it does not parse)."""
    parts = api_version.split("/")
    if len(parts) > 2:
        return ""
    return parts[-1]


class _Pointers:
    """Fake Go heap addresses for %#v of *bool fields: 0xc000... like a real message."""

    def __init__(self) -> None:
        self._next = itertools.count(random.randrange(0xC000010000, 0xC00FFF0000, 8))

    def of(self, value: Any) -> str:
        if not isinstance(value, bool):
            return "(*bool)(nil)"
        return f"(*bool)({next(self._next):#x})"


def _gostring_ref(ref: JSON, pointers: _Pointers) -> str:
    """%#v of one v1.OwnerReference."""
    q = _status.go_quote
    return (f'v1.OwnerReference{{APIVersion:{q(str(ref.get("apiVersion") or ""))}, '
            f'Kind:{q(str(ref.get("kind") or ""))}, Name:{q(str(ref.get("name") or ""))}, '
            f'UID:{q(str(ref.get("uid") or ""))}, '
            f"Controller:{pointers.of(ref.get('controller'))}, "
            f"BlockOwnerDeletion:{pointers.of(ref.get('blockOwnerDeletion'))}}}")


def _gostring_refs(refs: list[JSON], pointers: _Pointers) -> str:
    return "[]v1.OwnerReference{" + ", ".join(_gostring_ref(r, pointers) for r in refs) + "}"


def owner_reference_causes(obj: JSON, copies: int = 1, fresh_pointers: bool = False
                           ) -> list[JSON]:
    """ValidateOwnerReferences: empty apiVersion/kind/name/uid, Event owners, and a second
    ``controller: true`` (422 "Only one reference can have Controller set to true").

    The second quotes the whole list as Go's %#v, pointer addresses included; ``copies``
    repeats every cause (an update validates metadata several times). Typed kinds repeat
    one message (the aggregate shows it once); a custom resource is converted anew for each
    pass, so ``fresh_pointers`` gives every copy its own addresses (three messages).
    """
    refs = [r for r in _strings(obj.get("metadata")).get("ownerReferences") or []
            if isinstance(r, dict)]
    if not refs:
        return []
    first = _owner_pass(refs, _Pointers())
    out = list(first)
    for _ in range(copies - 1):
        out += _owner_pass(refs, _Pointers()) if fresh_pointers else [dict(c) for c in first]
    return out


def _owner_pass(refs: list[JSON], pointers: _Pointers) -> list[JSON]:
    """One run of ValidateOwnerReferences."""
    field = "metadata.ownerReferences"
    out: list[JSON] = []
    listed = first = ""
    for ref in refs:
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        for key, bad, value in (("apiVersion", not _version_of(api_version), api_version),
                                ("kind", not kind, kind),
                                ("name", not ref.get("name"), ""),
                                ("uid", not ref.get("uid"), "")):
            if bad:
                out.append(_status.cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_status.go_quote(value)}: "
                    f"{'version' if key == 'apiVersion' else key} must not be empty",
                    f"{field}.{key}"))
        if api_version == "v1" and kind == "Event":  # BannedOwners
            out.append(_status.cause(
                "FieldValueInvalid", f"Invalid value: {_gostring_ref(ref, pointers)}: "
                "/v1, Kind=Event is disallowed from being an owner", field))
        if ref.get("controller") is True:
            name = f"{kind}/{ref.get('name') or ''}"
            if not first:
                first = name
                continue
            listed = listed or _gostring_refs(refs, pointers)
            out.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {listed}: Only one reference can have Controller set to "
                f'true. Found "true" in references for {first} and {name}', field))
    return out


def replicas_causes(rt: ResourceType, obj: JSON) -> list[JSON]:
    """ValidateNonnegativeField on a workload's spec.replicas (a wrapped int32 lands here)."""
    if rt.group != "apps" or rt.kind not in ("Deployment", "ReplicaSet", "StatefulSet"):
        return []
    replicas = _strings(obj.get("spec")).get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
        return [_status.cause("FieldValueInvalid",
                              f"Invalid value: {replicas}: must be greater than or equal to 0",
                              "spec.replicas")]
    return []


def data_causes(rt: ResourceType, obj: JSON) -> list[JSON]:
    """ConfigMap and Secret key checks: ``data[key]`` causes (file 091)."""
    if rt.group or rt.kind not in ("ConfigMap", "Secret"):
        return []
    causes: list[JSON] = []
    fields = ("data", "binaryData") if rt.kind == "ConfigMap" else ("data",)
    for name in fields:
        for key in _strings(obj.get(name)):
            causes += _invalid(f"{name}[{key}]", key, _config_key_errors(key))
            if name == "binaryData" and key in _strings(obj.get("data")):
                causes += _invalid(f"data[{key}]", key,
                                   ["duplicate of key present in binaryData"])
    return causes


# ---- types: what decoding into the Go ObjectMeta refuses ---------------------------------------

_META_STRINGS = ("name", "generateName", "namespace", "uid", "resourceVersion", "selfLink")
_STRING_MAPS = ("labels", "annotations")


def json_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value in an UnmarshalTypeError (a fraction is
    named with its value: "number 1.5")."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float) and not value.is_integer():
        return f"number {value}"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _unmarshal(value: Any, where: str, go_type: str) -> str:
    return (f"json: cannot unmarshal {json_type(value)} into Go struct field {where} "
            f"of type {go_type}")


def type_error(obj: JSON, kind: str) -> str | None:
    """The first error decoding ``obj`` into its Go type would report for metadata of the
    wrong JSON type (null is allowed: it leaves the zero value), or None. Without this check
    a label list was stored and broke every later label selector (and watch) on its kind."""
    meta = obj.get("metadata")
    if meta is None:
        return _data_type_error(obj, kind)
    if not isinstance(meta, dict):
        return _unmarshal(meta, f"{kind}.metadata", "v1.ObjectMeta")
    for name in _META_STRINGS:
        value = meta.get(name)
        if value is not None and not isinstance(value, str):
            return _unmarshal(value, f"ObjectMeta.metadata.{name}", "string")
    for name in _STRING_MAPS:
        value = meta.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            return _unmarshal(value, f"ObjectMeta.metadata.{name}", "map[string]string")
        for item in value.values():
            if item is not None and not isinstance(item, str):
                return _unmarshal(item, f"ObjectMeta.metadata.{name}", "string")
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list):
            return _unmarshal(finalizers, "ObjectMeta.metadata.finalizers", "[]string")
        for item in finalizers:
            if item is not None and not isinstance(item, str):
                return _unmarshal(item, "ObjectMeta.metadata.finalizers", "string")
    return _data_type_error(obj, kind)


# ConfigMap and Secret maps: field -> bytes (base64 in JSON) or not
_DATA_MAPS = {"ConfigMap": (("data", False), ("binaryData", True)),
              "Secret": (("data", True), ("stringData", False))}
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\r\n")


def _data_type_error(obj: JSON, kind: str) -> str | None:
    """A ConfigMap's or Secret's data maps: strings, and base64 where they hold bytes
    (scenario secret-data: "illegal base64 data at input byte 3")."""
    for name, is_bytes in _DATA_MAPS.get(kind, ()):
        value = obj.get(name)
        if value is None:
            continue
        go_type = "map[string][]uint8" if is_bytes else "map[string]string"
        if not isinstance(value, dict):
            return _unmarshal(value, f"{kind}.{name}", go_type)
        for item in value.values():
            if item is not None and not isinstance(item, str):
                return _unmarshal(item, f"{kind}.{name}", "[]uint8" if is_bytes else "string")
            bad = next((i for i, c in enumerate(item or "") if c not in _BASE64), None)
            if is_bytes and bad is not None:
                return f"illegal base64 data at input byte {bad}"
    return None
