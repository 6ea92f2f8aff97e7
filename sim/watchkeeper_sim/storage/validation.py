"""Field validation on writes, as kube-apiserver 1.28 decodes request bodies.

Unknown fields never reach storage: built-in kinds drop what their Go types lack, custom
resources are pruned to their CRD's structural schema. ``fieldValidation`` only decides how a
client hears about it: Ignore (silently), Warn (default: one ``Warning: 299`` header per field,
files 112, 148) or Strict (400 ``strict decoding error``, files 113, 149); duplicate JSON keys
are reported the same way (114, 115). Custom resources are then checked against their
openAPIV3Schema (422, file 147).

Built-in kinds are known here by their top-level fields, ObjectMeta (exactly), and the typed
structures one level below (workload specs, templates' metadata, label selectors, RBAC rules,
event references); PodSpec, ServiceSpec, status blocks and CRD versions are left open (not
checked), which is where the cheap part stopped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage import structural as _structural
from watchkeeper_sim.storage.store import StoreError

# A known structure: dict = struct with these fields, [spec] = list of spec, None = open.
Spec: TypeAlias = "dict[str, Spec] | list[Spec] | None"

DIRECTIVES = ("Ignore", "Warn", "Strict")


def _struct(*names: str, **typed: Spec) -> dict[str, Spec]:
    out: dict[str, Spec] = dict.fromkeys(names)
    out.update(typed)
    return out


_OWNER_REFERENCE = _struct("apiVersion", "kind", "name", "uid", "controller",
                           "blockOwnerDeletion")
_MANAGED_FIELDS = _struct("manager", "operation", "apiVersion", "time", "fieldsType",
                          "fieldsV1", "subresource")
OBJECT_META = _struct(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "finalizers",
    ownerReferences=[_OWNER_REFERENCE], managedFields=[_MANAGED_FIELDS])
_SELECTOR = _struct("matchLabels",
                    matchExpressions=[_struct("key", "operator", "values")])
_POD_TEMPLATE = _struct("spec", metadata=OBJECT_META)
_OBJECT_REFERENCE = _struct("kind", "namespace", "name", "uid", "apiVersion",
                            "resourceVersion", "fieldPath")
_EVENT_SERIES = _struct("count", "lastObservedTime")
_EVENT_SOURCE = _struct("component", "host")
_POLICY_RULE = _struct("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
_SUBJECT = _struct("kind", "apiGroup", "name", "namespace")
_ROLE_REF = _struct("apiGroup", "kind", "name")
_JOB_SPEC = _struct(
    "parallelism", "completions", "activeDeadlineSeconds", "podFailurePolicy", "backoffLimit",
    "backoffLimitPerIndex", "maxFailedIndexes", "manualSelector", "ttlSecondsAfterFinished",
    "completionMode", "suspend", "podReplacementPolicy",
    selector=_SELECTOR, template=_POD_TEMPLATE)


def _kind(**fields: Spec) -> dict[str, Spec]:
    return _struct("apiVersion", "kind", metadata=OBJECT_META, **fields)


def _workload(*spec_fields: str) -> dict[str, Spec]:
    return _kind(status=None, spec=_struct(*spec_fields, selector=_SELECTOR,
                                           template=_POD_TEMPLATE))


# (group, kind) -> the fields its Go type has. Kinds not listed are not checked.
BUILTIN: dict[tuple[str, str], dict[str, Spec]] = {
    ("", "Namespace"): _kind(spec=_struct("finalizers"), status=None),
    ("", "ConfigMap"): _kind(data=None, binaryData=None, immutable=None),
    ("", "Secret"): _kind(data=None, stringData=None, type=None, immutable=None),
    ("", "Pod"): _kind(spec=None, status=None),
    ("", "Service"): _kind(spec=None, status=None),
    ("", "ServiceAccount"): _kind(secrets=[_OBJECT_REFERENCE],
                                  imagePullSecrets=[_struct("name")],
                                  automountServiceAccountToken=None),
    ("", "Event"): _kind(
        involvedObject=_OBJECT_REFERENCE, reason=None, message=None, source=_EVENT_SOURCE,
        firstTimestamp=None, lastTimestamp=None, count=None, type=None, eventTime=None,
        series=_EVENT_SERIES, action=None, related=_OBJECT_REFERENCE, reportingComponent=None,
        reportingInstance=None),
    ("apps", "Deployment"): _workload("replicas", "strategy", "minReadySeconds",
                                      "revisionHistoryLimit", "paused",
                                      "progressDeadlineSeconds"),
    ("apps", "ReplicaSet"): _workload("replicas", "minReadySeconds"),
    ("apps", "StatefulSet"): _workload("replicas", "volumeClaimTemplates", "serviceName",
                                       "podManagementPolicy", "updateStrategy",
                                       "revisionHistoryLimit", "minReadySeconds",
                                       "persistentVolumeClaimRetentionPolicy", "ordinals"),
    ("apps", "DaemonSet"): _workload("updateStrategy", "minReadySeconds",
                                     "revisionHistoryLimit"),
    ("batch", "Job"): _kind(spec=_JOB_SPEC, status=None),
    ("batch", "CronJob"): _kind(status=None, spec=_struct(
        "schedule", "timeZone", "startingDeadlineSeconds", "concurrencyPolicy", "suspend",
        "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
        jobTemplate=_struct(metadata=OBJECT_META, spec=_JOB_SPEC))),
    ("coordination.k8s.io", "Lease"): _kind(spec=_struct(
        "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
        "leaseTransitions")),
    ("events.k8s.io", "Event"): _kind(
        eventTime=None, series=_EVENT_SERIES, reportingController=None,
        reportingInstance=None, action=None, reason=None, regarding=_OBJECT_REFERENCE,
        related=_OBJECT_REFERENCE, note=None, type=None, deprecatedSource=_EVENT_SOURCE,
        deprecatedFirstTimestamp=None, deprecatedLastTimestamp=None, deprecatedCount=None),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _kind(status=None, spec=_struct(
        "group", "names", "scope", "versions", "conversion", "preserveUnknownFields")),
    ("rbac.authorization.k8s.io", "Role"): _kind(rules=[_POLICY_RULE]),
    ("rbac.authorization.k8s.io", "ClusterRole"): _kind(
        rules=[_POLICY_RULE], aggregationRule=_struct(clusterRoleSelectors=[_SELECTOR])),
    ("rbac.authorization.k8s.io", "RoleBinding"): _kind(subjects=[_SUBJECT],
                                                        roleRef=_ROLE_REF),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _kind(subjects=[_SUBJECT],
                                                               roleRef=_ROLE_REF),
}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _drop_unknown(value: Any, spec: Spec, path: str, out: list[str]) -> None:
    """Remove fields ``spec`` does not know from ``value`` (in place), in document order."""
    if isinstance(spec, dict) and isinstance(value, dict):
        for key in list(value):
            if key not in spec:
                out.append(_join(path, key))
                del value[key]
            else:
                _drop_unknown(value[key], spec[key], _join(path, key), out)
    elif isinstance(spec, list) and isinstance(value, list):
        for i, item in enumerate(value):
            _drop_unknown(item, spec[0], f"{path}[{i}]", out)


# ---- custom resources: structural pruning and schema validation ------------------------------


def _preserves(schema: JSON) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def _prune(value: Any, schema: JSON, path: str, out: list[str], root: bool = False,
           late: list[str] | None = None) -> None:
    """apiextensions' structural pruning: drop fields the schema does not specify. An
    embedded resource's metadata is pruned to ObjectMeta too, reported in ``late`` (after
    the others, crd-pruning)."""
    late = out if late is None else late
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        keep_meta = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if keep_meta and key in ("apiVersion", "kind"):
                continue
            if keep_meta and key == "metadata":
                _drop_unknown(value[key], OBJECT_META, _join(path, "metadata"),
                              out if root else late)
                continue
            if isinstance(props, dict) and key in props:
                sub = props[key]
            elif isinstance(extra, dict):
                sub = extra
            elif extra is True or _preserves(schema):
                continue
            else:
                out.append(_join(path, key))
                del value[key]
                continue
            if isinstance(sub, dict):
                _prune(value[key], sub, _join(path, key), out, late=late)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _prune(item, schema["items"], f"{path}[{i}]", out, late=late)


# JSON numbers the apiserver decodes to an int64, or to a float64 that kube-openapi still
# counts as an integer (whole, within +-(2^53 - 1)); anything else is a "number"
_INT64 = (-(2**63), 2**63 - 1)
_JSON_INTEGER_FLOAT = 2.0**53 - 1


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if _INT64[0] <= value <= _INT64[1] else "number"
    if isinstance(value, float):
        whole = value.is_integer() and abs(value) <= _JSON_INTEGER_FLOAT
        return "integer" if whole else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_value(value: Any) -> str:
    """How field.Invalid prints a value: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value if isinstance(value, str) else str(value))


def _type_ok(value: Any, want: str) -> bool:
    got = _type_name(value)
    return got == want or (want == "number" and got == "integer")


def _validate(value: Any, schema: JSON, path: str, causes: list[JSON]) -> None:
    """The kube-openapi checks a CRD schema states, worded as apiextensions reports them."""
    if value is None and schema.get("nullable"):
        return
    want = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if _type_name(value) not in ("integer", "string"):
            causes.append(_status.cause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{_type_name(value)}": {path} in body must be of type '
                f'integer,string: "{_type_name(value)}"', path))
            return
    elif isinstance(want, str) and want and not _type_ok(value, want):
        got = _type_name(value)
        causes.append(_status.cause(
            "FieldValueTypeInvalid",
            f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"', path))
        return
    causes += _structural.value_causes(value, schema, path)
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        allowed = ", ".join(json.dumps(e if isinstance(e, str) else _go_value(e)) for e in enum)
        causes.append(_status.cause(
            "FieldValueNotSupported",
            f"Unsupported value: {_go_value(value)}: supported values: {allowed}", path))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _bounds(value, schema, path, causes)
    if isinstance(value, str):
        _string(value, schema, path, causes)
    if isinstance(value, dict):
        # kube-openapi's object validator walks the properties (in Go map order: here the
        # value's) and only then checks the object's required ones (website_cases too-few)
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if not path and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                _validate(item, sub, _join(path, key), causes)
        for req in schema.get("required") or []:
            if req not in value:
                causes.append(_status.cause("FieldValueRequired", "Required value",
                                            _join(path, str(req))))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _validate(item, schema["items"], f"{path}[{i}]", causes)


def _bounds(value: float, schema: JSON, path: str, causes: list[JSON]) -> None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    msg = ""
    if isinstance(lo, (int, float)):
        if schema.get("exclusiveMinimum") and value <= lo:
            msg = f"should be greater than {_go_value(lo)}"
        elif value < lo:
            msg = f"should be greater than or equal to {_go_value(lo)}"
    if not msg and isinstance(hi, (int, float)):
        if schema.get("exclusiveMaximum") and value >= hi:
            msg = f"should be less than {_go_value(hi)}"
        elif value > hi:
            msg = f"should be less than or equal to {_go_value(hi)}"
    if msg:
        causes.append(_status.cause(
            "FieldValueInvalid", f"Invalid value: {_go_value(value)}: {path} in body {msg}",
            path))


def _string(value: str, schema: JSON, path: str, causes: list[JSON]) -> None:
    max_len = schema.get("maxLength")
    if isinstance(max_len, int) and len(value) > max_len:
        causes.append(_status.cause("FieldValueTooLong",
                                    f"Too long: may not be longer than {max_len}", path))
    min_len = schema.get("minLength")
    if isinstance(min_len, int) and len(value) < min_len:
        causes.append(_status.cause(
            "FieldValueInvalid",
            f"Invalid value: {_go_value(value)}: {path} in body should be at least {min_len} "
            "chars long", path))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # a Go (RE2) pattern Python cannot compile is not checked
        if not matched:
            causes.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {_go_value(value)}: {path} in body should match '{pattern}'",
                path))


def crd_schema(crd: JSON | None, version: str) -> JSON | None:
    """The openAPIV3Schema a CRD declares for ``version`` (None: no schema, nothing pruned)."""
    for v in ((crd or {}).get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, dict) else None
    return None


def drop_unknown(rt: ResourceType, obj: JSON, schema: JSON | None) -> list[str]:
    """Remove unknown fields from ``obj`` in place; their paths, as the apiserver names them.

    Custom resources report sorted paths (148: "extra" before "spec.shape"), then those in
    embedded resources' metadata; built-ins report in the order the decoder met them (112).
    A custom resource's numbers are read as Go reads them, and its nulls of non-nullable
    fields go (structural.py).
    """
    out: list[str] = []
    if rt.is_custom:
        late: list[str] = []
        _structural.go_numbers(obj)
        if schema is not None:
            _prune(obj, schema, "", out, root=True, late=late)
            _structural.drop_nulls(obj, schema)
        return sorted(out) + late
    spec = BUILTIN.get((rt.group, rt.kind))
    if spec is not None:
        _drop_unknown(obj, spec, "", out)
    return out


def whole_numbers(value: Any) -> Any:
    """A custom resource's whole floats (``3.0``, ``1e2``) as integers, in place: the
    apiserver stores its float64 as JSON, which writes them without a fraction, and reads
    them back as int64. A CRD's ``format: int32`` is not checked (nor is int64 beyond the
    JSON type): 2147483648 is stored as sent, as kube-apiserver 1.28 does."""
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = whole_numbers(item)
    elif isinstance(value, list):
        value[:] = [whole_numbers(item) for item in value]
    elif isinstance(value, float) and value.is_integer() and abs(value) <= _JSON_INTEGER_FLOAT:
        return int(value)
    return value


def schema_causes(obj: JSON, schema: JSON | None) -> list[JSON]:
    """422 causes for a custom resource that breaks its schema (file 147)."""
    causes: list[JSON] = []
    if schema is not None:
        _validate(obj, schema, "", causes)
    return causes


# ---- the request's directive ----------------------------------------------------------------


def duplicate_fields(raw: bytes) -> list[str]:
    """Paths of keys that occur twice in one JSON object of ``raw`` ([] if not JSON)."""
    dups: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: list[str] = []
        for k, v in items:
            if k in out and k not in seen:
                seen.append(k)
            out[k] = v
        if seen:
            dups[id(out)] = seen
        return out

    try:
        doc = json.loads(raw, object_pairs_hook=pairs)
    except ValueError:
        return []
    if not dups:
        return []
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            found.extend(_join(path, k) for k in dups.get(id(value), []))
            for k, v in value.items():
                walk(v, _join(path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(doc, "")
    return found


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@dataclass
class FieldCheck:
    """One write's ``fieldValidation`` directive and the Warning headers it produced."""

    directive: str = "Warn"
    duplicates: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def report(self, rt: ResourceType, unknown: list[str], whole_body: bool) -> None:
        """Strict: raise the 400; Warn: remember one warning per problem; Ignore: nothing.

        ``whole_body`` (POST/PUT) words the error as the decoder does (113, 149); patches get
        the bare ``strict decoding error`` of the patch handler.
        """
        problems = [f"duplicate field {_quote(p)}" for p in self.duplicates]
        problems += [f"unknown field {_quote(p)}" for p in unknown]
        self.duplicates = []
        if not problems or self.directive == "Ignore":
            return
        if self.directive == "Warn":
            self.warnings.extend(problems)
            return
        message = "strict decoding error: " + ", ".join(problems)
        if whole_body:
            message = (f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                       + message)
        raise StoreError(_status.bad_request(message))

    def headers(self) -> list[str]:
        """``Warning`` header values: ``299 - "<text>"`` with the text Go-quoted (112)."""
        return [f"299 - {_quote(w)}" for w in self.warnings]


def directive_causes(value: str | None) -> list[JSON]:
    """ValidateFieldValidation: 422 cause for a value other than "", Ignore, Warn, Strict."""
    if value is None or value == "" or value in DIRECTIVES:
        return []
    return [_status.cause(
        "FieldValueNotSupported",
        f'Unsupported value: {_quote(value)}: supported values: "", "Ignore", "Strict", "Warn"',
        "fieldValidation")]
