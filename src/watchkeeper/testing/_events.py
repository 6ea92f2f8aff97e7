"""One set of Events served as core/v1 Events and as events.k8s.io/v1 Events.

kube-apiserver stores every Event once (the core Event type, in etcd under /events) and
serves it through both APIs by conversion (pkg/apis/events/v1/conversion.go), so an Event a
controller writes through events.k8s.io/v1 is what ``kubectl get events`` and ``kubectl
describe`` read through core/v1, and the other way round. The simulator does the same: the
events.k8s.io/v1 ResourceType shares the core one's storage (``ResourceType.shares``), writes
through it are converted to the core form before they are stored, and every read (get,
list, watch, Table rows, write responses) is converted to the view asked for.

Field mapping (events/v1 <-> core/v1): note <-> message, regarding <-> involvedObject,
reportingController <-> reportingComponent, deprecatedSource <-> source,
deprecatedFirstTimestamp <-> firstTimestamp, deprecatedLastTimestamp <-> lastTimestamp,
deprecatedCount <-> count; eventTime, series, action, reason, related, type and
reportingInstance keep their names.
"""

from __future__ import annotations

from typing import Any

from watchkeeper.testing._store import JSON, ResourceType

CORE_KEY = ("", "events")  # where both views' objects live
EVENTS_GROUP = "events.k8s.io"

_V1_TO_CORE = {
    "note": "message",
    "regarding": "involvedObject",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_V1 = {core: v1 for v1, core in _V1_TO_CORE.items()}

# Serialized fields in Go struct order with what a zero value serializes as (a struct or
# metav1.Time without a pointer is never omitted: ``{}`` / ``null``); _OMIT = omitempty.
_OMIT = object()
_CORE_FIELDS: tuple[tuple[str, Any], ...] = (
    ("involvedObject", {}), ("reason", _OMIT), ("message", _OMIT), ("source", {}),
    ("firstTimestamp", None), ("lastTimestamp", None), ("count", _OMIT), ("type", _OMIT),
    ("eventTime", None), ("series", _OMIT), ("action", _OMIT), ("related", _OMIT),
    ("reportingComponent", ""), ("reportingInstance", ""),
)
_V1_FIELDS: tuple[tuple[str, Any], ...] = (
    ("eventTime", None), ("series", _OMIT), ("reportingController", _OMIT),
    ("reportingInstance", _OMIT), ("action", _OMIT), ("reason", _OMIT), ("regarding", {}),
    ("related", _OMIT), ("note", _OMIT), ("type", _OMIT), ("deprecatedSource", {}),
    ("deprecatedFirstTimestamp", None), ("deprecatedLastTimestamp", None),
    ("deprecatedCount", _OMIT),
)


def is_events_view(rt: ResourceType) -> bool:
    """The events.k8s.io Events: stored as core Events, served converted."""
    return rt.group == EVENTS_GROUP and rt.plural == "events"


def is_event(rt: ResourceType) -> bool:
    return rt.key == CORE_KEY


def _rename(obj: JSON, names: dict[str, str]) -> JSON:
    return {names.get(k, k): v for k, v in obj.items()}


def to_storage(rt: ResourceType, obj: JSON) -> JSON:
    """An object (or a partial one, e.g. an apply configuration) written through ``rt``, in
    the form it is stored in: core field names for the events.k8s.io view, without the
    zero values serving adds back (so a write that changes nothing stores nothing new)."""
    if not is_events_view(rt):
        return obj
    zeros = {name: zero for name, zero in _CORE_FIELDS if zero is not _OMIT}
    return {k: v for k, v in _rename(obj, _V1_TO_CORE).items()
            if not (k in zeros and v == zeros[k])}


def view_of(rt: ResourceType, stored: JSON) -> JSON:
    """What a patch through ``rt`` applies to: the stored object as the events.k8s.io view
    shows it; any other resource's stored object as it is."""
    return serve(rt, stored) if is_events_view(rt) else stored


def to_core_fields(obj: JSON) -> JSON:
    """An Event as served by either API, with core/v1 field names (for the printer)."""
    if str(obj.get("apiVersion", "")).startswith(EVENTS_GROUP + "/"):
        return _rename(obj, _V1_TO_CORE)
    return obj


def _ordered(obj: JSON, fields: tuple[tuple[str, Any], ...]) -> JSON:
    head = ("kind", "apiVersion", "metadata")
    out: JSON = {k: obj[k] for k in head if k in obj}
    for name, zero in fields:
        if name in obj and obj[name] is not None and not (zero is _OMIT and obj[name] in ("", 0)):
            out[name] = obj[name]
        elif zero is not _OMIT:
            out[name] = {} if isinstance(zero, dict) else zero
    known = {name for name, _ in fields}
    out.update((k, v) for k, v in obj.items() if k not in known and k not in head)
    return out


def serve(rt: ResourceType, obj: JSON) -> JSON:
    """A stored Event as ``rt`` serves it: renamed for events.k8s.io/v1, and in either view
    with the fields its Go type always serializes (``"firstTimestamp": null``, ``"source":
    {}`` ...), in the Go struct's order. Other resources pass through."""
    if rt.plural != "events" or not is_event(rt):  # the first test keeps hot paths cheap
        return obj
    if is_events_view(rt):
        return _ordered(_rename(obj, _CORE_TO_V1), _V1_FIELDS)
    return _ordered(obj, _CORE_FIELDS)
