"""How get/list/watch answers are represented: Accept negotiation and output rendering.

A read names its representation in the Accept header: the object as JSON or YAML, a
meta.k8s.io/v1 Table (``kubectl get``), or PartialObjectMetadata(List) (metadata informers).
``negotiate`` picks one or raises the apiserver's 406/400 as a ``StoreError``; the other
functions render an object, a list or watch lines in that representation with ``_table.py``.
Error answers are never transformed: they stay JSON Status bodies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from watchkeeper.testing import _events, _http, _keyorder, _protobuf
from watchkeeper.testing._registry import present
from watchkeeper.testing._store import JSON, ResourceType, StoreError
from watchkeeper.testing._table import (
    Representation,
    invalid_include_object,
    not_acceptable_status,
    parse_accept,
    partial_object_metadata,
    partial_object_metadata_list,
    partial_watch_event,
    representation_mismatch_status,
    table_for_list,
    table_for_object,
    table_watch_event,
)

YAML_CONTENT_TYPE = "application/yaml"


@dataclass(frozen=True)
class Output:
    """The negotiated representation and, for Tables, the includeObject policy."""

    rep: Representation = "json"
    include: str = "Metadata"


def negotiate(accept: str | None, query: Mapping[str, str], rt: ResourceType, *,
              is_list: bool, watch: bool = False) -> Output:
    """The representation for a read, or StoreError(406 / 400) when none fits.

    A watch streams single objects, so it takes ``as=PartialObjectMetadata`` (not ...List),
    and it cannot stream YAML (the apiserver has no YAML stream serializer).
    """
    rep = parse_accept(accept, protobuf=not watch and _protobuf.supports(rt))
    if rep is None or (watch and rep == "yaml"):
        raise StoreError(not_acceptable_status())
    mismatch = representation_mismatch_status(rep, rt, is_list and not watch)
    if mismatch is not None:
        raise StoreError(mismatch)
    include = query.get("includeObject") or "Metadata"
    if rep == "table":
        bad = invalid_include_object(query.get("includeObject"))
        if bad is not None:
            raise StoreError(bad)
    return Output(rep, include)


class _GoYamlDumper(yaml.SafeDumper):
    """go-yaml quotes a scalar that needs quoting with double quotes (``c: "3"``, 125),
    where PyYAML would pick single quotes."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def yaml_response(body: Any, status: int = 200) -> web.Response:
    """A YAML body as the apiserver writes it (125): keys sorted, block style."""
    text = yaml.dump(body, Dumper=_GoYamlDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True)
    return web.Response(body=text.encode(), status=status,
                        headers={**_http.BASE_HEADERS, "Content-Type": YAML_CONTENT_TYPE})


def _protobuf_response(body: bytes) -> web.Response:
    return web.Response(body=body, headers={**_http.BASE_HEADERS,
                                            "Content-Type": _protobuf.CONTENT_TYPE})


def _send(out: Output, body: JSON) -> web.Response:
    if out.rep == "yaml":
        return yaml_response(body)
    return _http.json_response(body)


def object_response(out: Output, rt: ResourceType, obj: JSON) -> web.Response:
    """A single-object GET; ``obj`` as served (kind and apiVersion present)."""
    if out.rep == "table":
        return _http.json_response(table_for_object(rt, obj, out.include))
    if out.rep == "partial":
        return _http.json_response(partial_object_metadata(obj))
    if out.rep == "protobuf":
        return _protobuf_response(_protobuf.encode_object(rt, obj))
    return _send(out, obj)


def list_item(rt: ResourceType, obj: JSON) -> JSON:
    """An item as a plain list shows it: built-ins without kind/apiVersion, CRs with them."""
    if rt.is_custom:
        return present(obj, rt)
    if rt.plural == "events":  # core and events.k8s.io views of one stored set
        obj = _events.serve(rt, obj)
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def list_response(out: Output, rt: ResourceType, items: list[JSON], meta: JSON) -> web.Response:
    """A LIST of stored ``items``; ``meta`` is its ListMeta (resourceVersion, continue...)."""
    if out.rep == "table":
        # rows with includeObject=Object carry kind and apiVersion (016)
        rows = [present(i, rt) for i in items]
        return _http.json_response(table_for_list(rt, rows, meta, out.include))
    if out.rep == "partial-list":
        return _http.json_response(partial_object_metadata_list(items, meta))
    if out.rep == "protobuf":
        return _protobuf_response(_protobuf.encode_list(rt, items, meta))
    body: JSON = {"kind": rt.list_kind, "apiVersion": rt.group_version, "metadata": meta,
                  "items": [list_item(rt, i) for i in items]}
    if rt.is_custom:  # an unstructured list: continue always set, every key sorted (138)
        body["metadata"] = {"continue": "", **meta}
        body = _keyorder.sort_object(body)
    return _send(out, body)


def watch_renderer(out: Output, rt: ResourceType) -> WatchRenderer | None:
    """The line transformer of a watch, or None when lines go out as they are (plain JSON)."""
    return None if out.rep == "json" else WatchRenderer(out, rt)


@dataclass
class WatchRenderer:
    """Turns each watch line ``{"type", "object"}`` into the negotiated representation.

    Only the first line of a Table stream carries columnDefinitions (017), whatever its type;
    ERROR lines pass through unchanged.
    """

    out: Output
    rt: ResourceType
    _first: bool = field(default=True, init=False)

    def __call__(self, line: JSON) -> JSON:
        first, self._first = self._first, False
        event_type, obj = line["type"], line["object"]
        if self.out.rep == "table":
            return table_watch_event(self.rt, event_type, obj, first, self.out.include)
        if self.out.rep == "partial":
            return partial_watch_event(event_type, obj)
        return line
