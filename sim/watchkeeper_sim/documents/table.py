"""Server-side printing (meta.k8s.io/v1 Table) and metadata-only views, as pure functions.

``kubectl get`` asks for Tables (kubectl-logs/01) and prints the cells it receives; metadata
informers ask for PartialObjectMetadata(List). The shapes follow kube-apiserver 1.28 (files
014-017, 043, 044, 150). Column sets exist for the kinds people list most (configmaps,
secrets, namespaces, pods, deployments, events); a custom resource gets its CRD version's
additionalPrinterColumns (_printcolumns.py); every other built-in and a CRD without
additionalPrinterColumns gets Name + Age (150).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

from watchkeeper_sim.documents import events as _events
from watchkeeper_sim.documents import keyorder as _keyorder
from watchkeeper_sim.documents import printcolumns as _printcolumns
from watchkeeper_sim.documents.discovery import media_ranges
from watchkeeper_sim.model import ResourceType

JSON = dict[str, Any]

Representation = Literal["table", "partial", "partial-list", "json", "yaml", "protobuf"]
IncludeObject = Literal["None", "Metadata", "Object"]

META_V1 = "meta.k8s.io/v1"
# Table and PartialObjectMetadata(List) answers carry a plain JSON Content-Type (014, 043).
CONTENT_TYPE = "application/json"

# Column descriptions are the API's field documentation; Name, Age and ConfigMap's Data are
# kept byte-for-byte as the reference shows them (014) since clients may compare them.
_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
    "#metadata"
)
_CONFIGMAP_DATA_DOC = (
    "Data contains the configuration data. Each key must consist of alphanumeric characters, "
    "'-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The "
    "keys stored in Data must not overlap with the keys in the BinaryData field, this is "
    "enforced during validation process."
)


def _column(name: str, description: str, type_: str = "string", fmt: str = "",
            priority: int = 0) -> JSON:
    return {"name": name, "type": type_, "format": fmt, "description": description,
            "priority": priority}


# ---------------------------------------------------------------------------------------------
# Ages


def human_duration(seconds: float) -> str:
    """Age as kubectl shows it ("5s", "3m2s", "4h10m", "3d5h", "2y40d").

    Same thresholds as apimachinery's HumanDuration: exact seconds below two minutes, then
    progressively coarser units; a clock skew of up to a second reads as "0s".
    """
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def age(obj: Mapping[str, Any], now: datetime | None = None) -> str:
    """The Age cell of an object: time since creationTimestamp, "<unknown>" without one."""
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return "<unknown>"
    return human_duration(((now or datetime.now(UTC)) - created).total_seconds())


# ---------------------------------------------------------------------------------------------
# Per-kind columns


Cells = Callable[[Mapping[str, Any]], list[Any]]
WholeRow = Callable[[Mapping[str, Any], datetime], list[Any]]


def _no_cells(obj: Mapping[str, Any]) -> list[Any]:
    return []


@dataclass(frozen=True)
class _Printer:
    """Columns between Name and Age (``middle``), their cells, and columns after Age."""

    middle: tuple[JSON, ...] = ()
    middle_cells: Cells = _no_cells
    trailing: tuple[JSON, ...] = ()
    trailing_cells: Cells = _no_cells
    age_type: str = "string"
    # a printer that defines every column itself (no Name ... Age frame): events, CRDs
    whole: tuple[JSON, ...] | None = None
    whole_cells: WholeRow | None = None


def _dict(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _configmap_cells(obj: Mapping[str, Any]) -> list[Any]:
    return [len(_dict(obj, "data")) + len(_dict(obj, "binaryData"))]


def _secret_cells(obj: Mapping[str, Any]) -> list[Any]:
    return [obj.get("type") or "Opaque", len(_dict(obj, "data"))]


def _namespace_cells(obj: Mapping[str, Any]) -> list[Any]:
    return [_dict(obj, "status").get("phase") or "Active"]


def _pod_cells(obj: Mapping[str, Any]) -> list[Any]:
    spec, status = _dict(obj, "spec"), _dict(obj, "status")
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    statuses = status.get("containerStatuses")
    statuses = [s for s in statuses if isinstance(s, Mapping)] if isinstance(statuses,
                                                                               list) else []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    if _dict(obj, "metadata").get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{len(containers or [])}", reason, str(restarts)]


def _pod_trailing(obj: Mapping[str, Any]) -> list[Any]:
    return [_dict(obj, "status").get("podIP") or "<none>",
            _dict(obj, "spec").get("nodeName") or "<none>"]


def _deployment_cells(obj: Mapping[str, Any]) -> list[Any]:
    spec, status = _dict(obj, "spec"), _dict(obj, "status")
    desired = spec.get("replicas", 1)
    return [
        f"{int(status.get('readyReplicas') or 0)}/{int(desired or 0)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
    ]


def _deployment_trailing(obj: Mapping[str, Any]) -> list[Any]:
    template = _dict(_dict(obj, "spec"), "template")
    containers = _dict(template, "spec").get("containers")
    containers = [c for c in containers if isinstance(c, Mapping)] if isinstance(
        containers, list) else []
    selector = _dict(_dict(obj, "spec"), "selector").get("matchLabels")
    labels = ",".join(f"{k}={v}" for k, v in selector.items()) if isinstance(
        selector, Mapping) else ""
    return [
        ",".join(str(c.get("name", "")) for c in containers) or "<none>",
        ",".join(str(c.get("image", "")) for c in containers) or "<none>",
        labels or "<none>",
    ]


def _crd_row(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    """The CustomResourceDefinition resource's own columns: its creation time, as is."""
    meta = _dict(obj, "metadata")
    return [meta.get("name") or "", meta.get("creationTimestamp")]


_PRINTERS: dict[tuple[str, str], _Printer] = {
    ("", "configmaps"): _Printer(
        middle=(_column("Data", _CONFIGMAP_DATA_DOC),), middle_cells=_configmap_cells),
    ("", "secrets"): _Printer(
        middle=(_column("Type", "The type of the secret (Opaque when unset)."),
                _column("Data", "Number of keys in the secret's data.")),
        middle_cells=_secret_cells),
    ("", "namespaces"): _Printer(
        middle=(_column("Status", "The phase of the namespace: Active or Terminating."),),
        middle_cells=_namespace_cells),
    ("", "pods"): _Printer(
        middle=(_column("Ready", "Ready containers out of all containers of the pod."),
                _column("Status", "The pod's status reason, or else its phase."),
                _column("Restarts", "Container restarts summed over the pod.")),
        middle_cells=_pod_cells,
        trailing=(_column("IP", "The pod's IP address.", priority=1),
                  _column("Node", "The node the pod is bound to.", priority=1)),
        trailing_cells=_pod_trailing),
    ("apps", "deployments"): _Printer(
        middle=(_column("Ready", "Ready replicas out of the desired replicas."),
                _column("Up-to-date", "Replicas running the latest template.", "integer"),
                _column("Available", "Replicas available to serve.", "integer")),
        middle_cells=_deployment_cells,
        trailing=(_column("Containers", "Names of the pod template's containers.",
                          priority=1),
                  _column("Images", "Images of the pod template's containers.", priority=1),
                  _column("Selector", "The deployment's label selector.", priority=1)),
        trailing_cells=_deployment_trailing),
    # apiextensions' default table: Name, Created At (a date column, the timestamp as is)
    ("apiextensions.k8s.io", "customresourcedefinitions"): _Printer(
        whole=(_column("Name", _NAME_DOC, fmt="name"),
               _column("Created At", _AGE_DOC, type_="date")),
        whole_cells=_crd_row),
}


# The event printer's columns (pkg/printers/internalversion printEvent): descriptions are
# core/v1 Event's field documentation. The server prints wide, so every cell is sent.
_EVENT_COLUMNS = (
    _column("Last Seen", "The time at which the most recent occurrence of this event was "
            "recorded."),
    _column("Type", "Type of this event (Normal, Warning), new types could be added in the "
            "future"),
    _column("Reason", "This should be a short, machine understandable string that gives the "
            "reason for the transition into the object's current status."),
    _column("Object", "The object that this event is about."),
    _column("Subobject", "If referring to a piece of an object instead of an entire object, "
            "this string should contain a valid JSON/Go field access statement, such as "
            "desiredState.manifest.containers[2].", priority=1),
    _column("Source", "The component reporting this event. Should be a short machine "
            "understandable string.", priority=1),
    _column("Message", "A human-readable description of the status of this operation."),
    _column("First Seen", "The time at which the event was first recorded. (Time of server "
            "receipt is in TypeMeta.)", priority=1),
    _column("Count", "The number of times this event has occurred.", priority=1),
    _column("Name", _NAME_DOC, fmt="name", priority=1),
)


def _since(value: Any, now: datetime) -> str:
    """translateTimestampSince: an age, "<unknown>" for a zero (absent) time."""
    moment = parse_time(value)
    return "<unknown>" if moment is None else human_duration((now - moment).total_seconds())


def _event_row(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    """printEvent's wide cells, for an Event served by core/v1 or events.k8s.io/v1."""
    ev = _events.to_core_fields(dict(obj))
    first = _since(ev.get("firstTimestamp"), now)
    if parse_time(ev.get("firstTimestamp")) is None:
        first = _since(ev.get("eventTime"), now)
    last = _since(ev.get("lastTimestamp"), now)
    if parse_time(ev.get("lastTimestamp")) is None:
        last = first
    count = ev.get("count") or 0
    series = ev.get("series")
    if isinstance(series, Mapping):
        last = _since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1  # singleton events have no count in the new API
    ref = _dict(ev, "involvedObject")
    kind = str(ref.get("kind") or "").lower()
    target = f"{kind}/{ref['name']}" if ref.get("name") else kind
    source = _dict(ev, "source")
    component = source.get("component") or ev.get("reportingComponent") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    return [last, ev.get("type") or "", ev.get("reason") or "", target,
            ref.get("fieldPath") or "", f"{component}, {host}" if host else component,
            str(ev.get("message") or "").strip(), first, int(count),
            _dict(ev, "metadata").get("name") or ""]


@lru_cache(maxsize=64)
def _crd_printer(rt: ResourceType) -> _Printer:
    """Name, then the CRD version's additionalPrinterColumns (apiextensions tableconvertor)."""
    columns = _printcolumns.usable(rt.printer_columns)

    def cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
        return [_dict(obj, "metadata").get("name") or "",
                *(_printcolumns.cell(c, obj, now, _since) for c in columns)]

    return _Printer(whole=(_column("Name", _NAME_DOC, fmt="name"),
                           *(_printcolumns.definition(c) for c in columns)),
                    whole_cells=cells)


def _printer(rt: ResourceType) -> _Printer:
    if rt.is_custom:
        if rt.printer_columns:  # even if none parses: then Name alone
            return _crd_printer(rt)
        return _Printer(age_type="date")  # 150: a CRD's default Age column is of type date
    if _events.is_event(rt):
        return _Printer(whole=_EVENT_COLUMNS, whole_cells=_event_row)
    return _PRINTERS.get((rt.group, rt.plural), _Printer())


def column_definitions(rt: ResourceType) -> list[JSON]:
    """Table columns for a resource: Name, the kind's own columns, Age, then wide columns."""
    p = _printer(rt)
    if p.whole is not None:
        return [dict(c) for c in p.whole]
    return [
        _column("Name", _NAME_DOC, fmt="name"),
        *(dict(c) for c in p.middle),
        _column("Age", _AGE_DOC, type_=p.age_type),
        *(dict(c) for c in p.trailing),
    ]


# ---------------------------------------------------------------------------------------------
# Metadata-only views


def partial_object_metadata(obj: Mapping[str, Any]) -> JSON:
    """PartialObjectMetadata of an object (044): its whole metadata, nothing else.

    The metadata dict is copied one level deep; nested values are shared with ``obj``.
    """
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": META_V1,
        "metadata": _keyorder.object_meta(dict(_dict(obj, "metadata"))),
    }


_LIST_META_KEYS = ("resourceVersion", "continue", "remainingItemCount")


def _list_metadata(list_meta: Mapping[str, Any] | None) -> JSON:
    """ListMeta in the apiserver's key order, empty values dropped (they are omitempty)."""
    meta = dict(list_meta or {})
    out = {k: meta[k] for k in _LIST_META_KEYS if meta.get(k) not in (None, "")}
    out.update((k, v) for k, v in meta.items() if k not in _LIST_META_KEYS)
    return out


def partial_object_metadata_list(items: Iterable[Mapping[str, Any]],
                                 list_meta: Mapping[str, Any] | None = None) -> JSON:
    """PartialObjectMetadataList (043): list metadata (RV, continue, remaining) kept as is."""
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_V1,
        "metadata": _list_metadata(list_meta),
        "items": [partial_object_metadata(o) for o in items],
    }


# ---------------------------------------------------------------------------------------------
# Tables


def _row(rt: ResourceType, obj: Mapping[str, Any], include_object: str,
         now: datetime) -> JSON:
    p = _printer(rt)
    if p.whole_cells is not None:
        cells = p.whole_cells(obj, now)
    else:
        name = _dict(obj, "metadata").get("name") or ""
        cells = [name, *p.middle_cells(obj), age(obj, now), *p.trailing_cells(obj)]
    row: JSON = {"cells": cells}
    if include_object == "Object":
        row["object"] = obj
    elif include_object == "None":
        row["object"] = None
    else:
        row["object"] = partial_object_metadata(obj)
    return row


def _table(rt: ResourceType, metadata: JSON, objects: Iterable[Mapping[str, Any]],
           include_object: str, now: datetime | None, headers: bool = True) -> JSON:
    moment = now or datetime.now(UTC)
    return {
        "kind": "Table",
        "apiVersion": META_V1,
        "metadata": metadata,
        "columnDefinitions": column_definitions(rt) if headers else None,
        "rows": [_row(rt, o, include_object, moment) for o in objects],
    }


def table_for_list(
    rt: ResourceType,
    items: Iterable[Mapping[str, Any]],
    list_meta: Mapping[str, Any] | None = None,
    include_object: str = "Metadata",
    now: datetime | None = None,
) -> JSON:
    """Table of a LIST (014, 016, 150); metadata carries the list's RV/continue/remaining.

    ``include_object`` is the ``includeObject`` query value: Metadata (default) puts a
    PartialObjectMetadata in each row, Object the object itself, None null. Check it first
    with ``invalid_include_object``.
    """
    return _table(rt, _list_metadata(list_meta), items, include_object, now)


def table_for_object(
    rt: ResourceType,
    obj: Mapping[str, Any],
    include_object: str = "Metadata",
    now: datetime | None = None,
) -> JSON:
    """Table of a single-object GET (015): one row, metadata.resourceVersion of the object."""
    rv = _dict(obj, "metadata").get("resourceVersion")
    return _table(rt, {"resourceVersion": rv} if rv else {}, [obj], include_object, now)


def table_watch_event(
    rt: ResourceType,
    event_type: str,
    obj: Mapping[str, Any],
    first: bool,
    include_object: str = "Metadata",
    now: datetime | None = None,
) -> JSON:
    """One watch line for a Table watch (017): ``{"type", "object": Table with one row}``.

    Only the stream's first event carries columnDefinitions; later ones have null (the
    caller tracks ``first``). ERROR events (a Status object) pass through untouched.
    BOOKMARK objects are converted like any other, as the apiserver does: a row with an
    empty name and "<unknown>" age whose table metadata holds the bookmark's RV.
    """
    if event_type == "ERROR" or obj.get("kind") == "Status":
        return {"type": event_type, "object": obj}
    rv = _dict(obj, "metadata").get("resourceVersion")
    table = _table(rt, {"resourceVersion": rv} if rv else {}, [obj], include_object, now,
                   headers=first)
    return {"type": event_type, "object": table}


def partial_watch_event(event_type: str, obj: Mapping[str, Any]) -> JSON:
    """One watch line for a metadata-only watch: the object as PartialObjectMetadata."""
    if event_type == "ERROR" or obj.get("kind") == "Status":
        return {"type": event_type, "object": obj}
    return {"type": event_type, "object": partial_object_metadata(obj)}


# ---------------------------------------------------------------------------------------------
# Negotiation


_AS_KINDS: dict[str, Representation] = {
    "table": "table",
    "partialobjectmetadata": "partial",
    "partialobjectmetadatalist": "partial-list",
}


def parse_accept(accept: str | None, protobuf: bool = False) -> Representation | None:
    """The representation to send for an Accept header; None means 406 (124).

    ``as=Table`` / ``as=PartialObjectMetadata(List)`` clauses count only for JSON with
    ``g=meta.k8s.io;v=v1`` (v1beta1 is skipped, so kubectl's header lands on v1). Plain JSON,
    ``*/*`` and ``application/*`` mean the object as JSON, ``application/yaml`` as YAML (the
    real server serves YAML, 125). Protobuf only when ``protobuf`` says the kind can be
    encoded (126); otherwise, like CBOR, its clauses are skipped, and an Accept with nothing
    usable is refused.
    """
    if not (accept or "").strip():
        return "json"
    for r in media_ranges(accept):
        as_kind = r.params.get("as")
        if as_kind is not None:
            wanted = _AS_KINDS.get(as_kind.lower())
            if (
                wanted is not None
                and r.type == "application"
                and r.subtype == "json"
                and r.params.get("g") == "meta.k8s.io"
                and r.params.get("v") == "v1"
            ):
                return wanted
            continue
        if r.type == "*" or (r.type == "application" and r.subtype in ("json", "*")):
            return "json"
        if r.type == "application" and r.subtype == "yaml":
            return "yaml"
        if protobuf and r.type == "application" and r.subtype == "vnd.kubernetes.protobuf":
            return "protobuf"
    return None


def not_acceptable_status() -> JSON:
    """The 406 Status for a resource request whose Accept cannot be met (124)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "406: Not Acceptable\n\nAvailable representations: application/json, "
        "application/yaml, application/vnd.kubernetes.protobuf",
        "reason": "NotAcceptable",
        "details": {},
        "code": 406,
    }


def representation_mismatch_status(wanted: Representation, rt: ResourceType,
                                   is_list: bool) -> JSON | None:
    """406 Status when PartialObjectMetadata is asked of a list, or ...List of an object.

    Returns None when the representation fits the request. The message names the Go type
    the way the apiserver does (``*v1.ConfigMapList``; custom resources are unstructured).
    """
    if wanted == "partial" and is_list:
        go_type = "*unstructured.UnstructuredList" if rt.is_custom else (
            f"*{rt.version}.{rt.list_kind}")
        message = ("you requested PartialObjectMetadata, but the requested object is a list "
                   f"({go_type})")
    elif wanted == "partial-list" and not is_list:
        go_type = "*unstructured.Unstructured" if rt.is_custom else f"*{rt.version}.{rt.kind}"
        message = ("you requested PartialObjectMetadataList, but the requested object is not "
                   f"a list ({go_type})")
    else:
        return None
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "NotAcceptable",
        "code": 406,
    }


def invalid_include_object(value: str | None) -> JSON | None:
    """400 Status for an unknown ``includeObject`` value; None when it is valid or absent."""
    if value in (None, "", "None", "Metadata", "Object"):
        return None
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'unrecognized includeObject value: "{value}"',
        "reason": "BadRequest",
        "code": 400,
    }
