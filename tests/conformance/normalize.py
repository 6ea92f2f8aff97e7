"""A transcript without what differs between any two runs of one scenario on one server.

Kept: status codes, messages, every field and its value, the order of list items and of
watch events, and the relations between values (an object's resourceVersion is ``<rv-3>``
each time it is the same, a dependent's ownerReference names ``<uid-1>`` when that is its
owner's uid). Replaced: the scenario's namespace and group (``{ns}``, ``{group}``: the
placeholders the scenarios are written with), uids and object resourceVersions (numbered in
order of first appearance), a list's resourceVersion and continue token (which count every
write on the server, other tenants' too), timestamps, generated names, cluster IPs and node
ports, ages in tables, the service-account volume's random suffix, PEM blocks (the
cluster CA that kube-root-ca.crt carries).
A resourceVersion quoted in a message gets its number too, and Go pointers printed in
messages become ``<pointer>``. managedFields entries are sorted (see ``_managed_fields``).
JSON key order is not compared (transcripts are rendered with sorted keys).
"""

from __future__ import annotations

import json
import re
from typing import Any

_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
# the service-account admission's projected volume: kube-api-access-<5 random characters>
_API_ACCESS = re.compile(r"\bkube-api-access-[a-z0-9]{5}\b")
# the five characters kube-apiserver appends to a generateName (no vowels, no 0, 1, 3)
_GENERATED = "[bcdfghjklmnpqrstvwxz2456789]{5}"
_PEM = re.compile(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\n?", re.S)
# a resourceVersion quoted inside a message: a precondition's record, an object as JSON text
_RV_IN_TEXT = re.compile(r'(ResourceVersion in record \(|resourceVersion\\*":\\*")(\d+)')
# a Go pointer printed by %#v in a validation message: (*bool)(0xc00293df9c)
_POINTER = re.compile(r"\b0xc[0-9a-f]{6,}\b")
_AGE = re.compile(r"(?:<invalid>|(?:\d+(?:ms|s|m|h|d|y))+)")
_IP = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f:]*:[0-9a-f:]+)$")
_IP_KEYS = {"clusterIP", "clusterIPs", "podIP", "hostIP", "ip"}
_PORT_KEYS = {"nodePort", "healthCheckNodePort"}
_LIST_KINDS = ("Table",)


class Normalizer:
    """One per transcript: the numbering of uids, resourceVersions and generated names is
    shared by all its steps."""

    def __init__(self, namespace: str, group: str, *, managed_fields: bool) -> None:
        # the group holds the namespace's text ({prefix}-{scenario}.example.com): it goes first
        self.names = [(group, "{group}"), (namespace, "{ns}")]
        self.managed_fields = managed_fields
        self.uids: dict[str, str] = {}
        self.rvs: dict[str, str] = {}
        self.generated: dict[str, str] = {}
        self.prefixes: set[str] = set()
        self.generated_re: re.Pattern[str] | None = None

    def transcript(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._collect_generated(steps)
        out: list[dict[str, Any]] = self._value(steps, list_meta=False)
        return out

    # -- generated names: gen-x7k2p -> gen-<gen-1>, wherever the name is quoted ------------

    def _collect_generated(self, value: Any) -> None:
        """Every generateName prefix: of objects, of request bodies (a refused create quotes
        the name it generated in its message)."""
        if isinstance(value, dict):
            meta = value.get("metadata")
            prefix = meta.get("generateName") if isinstance(meta, dict) else None
            if isinstance(prefix, str) and prefix:
                self.prefixes.add(prefix)
            for key in sorted(value):
                self._collect_generated(value[key])
        elif isinstance(value, list):
            for item in value:
                self._collect_generated(item)
        if self.prefixes:
            self.generated_re = re.compile("(" + "|".join(
                re.escape(p) for p in sorted(self.prefixes, key=len, reverse=True))
                + f")({_GENERATED})(?![a-z0-9])")

    def _generated(self, match: re.Match[str]) -> str:
        name = match.group(0)
        if name not in self.generated:
            self.generated[name] = f"{match.group(1)}<gen-{len(self.generated) + 1}>"
        return self.generated[name]

    # -- the walk -------------------------------------------------------------------------

    def _value(self, value: Any, *, list_meta: bool, key: str = "") -> Any:
        if isinstance(value, dict):
            return self._dict(value, list_meta=list_meta)
        if isinstance(value, list):
            return [self._value(v, list_meta=False, key=key) for v in value]
        if isinstance(value, str):
            if key in _IP_KEYS and _IP.match(value) and value != "None":
                return "<ip>"
            return self.text(value)
        if key in _PORT_KEYS and isinstance(value, int):
            return "<nodeport>"
        return value

    def _dict(self, obj: dict[str, Any], *, list_meta: bool) -> dict[str, Any]:
        is_list = "items" in obj or str(obj.get("kind", "")).endswith("List") or (
            obj.get("kind") in _LIST_KINDS)
        out: dict[str, Any] = {}
        for key in sorted(obj):
            value = obj[key]
            if key == "managedFields" and not self.managed_fields:
                continue
            if key == "managedFields" and isinstance(value, list):
                out[key] = self._managed_fields(value)
                continue
            if key == "resourceVersion" and isinstance(value, str) and value:
                out[key] = "<rv>" if list_meta else self._rv(value)
            elif key == "continue" and list_meta and isinstance(value, str) and value:
                out[key] = "<continue>"
            elif key == "metadata" and isinstance(value, dict):
                out[key] = self._dict(value, list_meta=is_list)
            elif key == "rows" and obj.get("kind") == "Table" and isinstance(value, list):
                out[key] = self._table_rows(obj, value)
            elif key == "causes" and isinstance(value, list):
                # a cluster lists the conflicts of an apply (and the causes of one object's
                # schema violations) in Go map order; the message keeps the order compared
                out[key] = sorted(self._value(value, list_meta=False),
                                  key=lambda c: json.dumps(c, sort_keys=True))
            elif key == "stdout_table" and isinstance(value, list):  # kubectl get's columns
                out[key] = [[self.table_cell(c) for c in row] for row in value]
            else:
                out[key] = self._value(value, list_meta=False, key=key)
        return out

    def _managed_fields(self, entries: list[Any]) -> list[Any]:
        """Sorted without their times: the apiserver orders entries by operation, time in
        seconds, then manager, so two writes a second apart or within one second come in
        either order; and a cluster's controllers (kube-controller-manager writing a
        Deployment's status) race with the scenario's steps, so their entries go."""
        kept = [self._value(e, list_meta=False) for e in entries
                if not (isinstance(e, dict) and e.get("manager") == "kube-controller-manager")]
        return sorted(kept, key=lambda e: [str(e.get(k, "")) for k in (
            "manager", "operation", "subresource", "apiVersion")] if isinstance(e, dict)
            else [json.dumps(e)])

    def _table_rows(self, table: dict[str, Any], rows: list[Any]) -> list[Any]:
        """A Table's age cells: the Age column and columns of type date."""
        columns = table.get("columnDefinitions") or []
        ages = {i for i, c in enumerate(columns) if isinstance(c, dict) and (
            c.get("name") == "Age" or c.get("type") == "date")}
        out = []
        for row in rows:
            row = self._value(row, list_meta=False)
            cells = row.get("cells") if isinstance(row, dict) else None
            if isinstance(cells, list):
                row["cells"] = ["<age>" if i in ages and isinstance(c, str) and c else c
                                for i, c in enumerate(cells)]
            out.append(row)
        return out

    def _rv(self, value: str) -> str:
        if value not in self.rvs:
            self.rvs[value] = f"<rv-{len(self.rvs) + 1}>"
        return self.rvs[value]

    def _uid(self, match: re.Match[str]) -> str:
        uid = match.group(0)
        if uid not in self.uids:
            self.uids[uid] = f"<uid-{len(self.uids) + 1}>"
        return self.uids[uid]

    def text(self, value: str) -> str:
        for real, placeholder in self.names:
            value = value.replace(real, placeholder)
        value = _PEM.sub("<pem>", value)
        value = _API_ACCESS.sub("kube-api-access-<gen>", value)
        value = _UID.sub(self._uid, value)
        value = _TIME.sub("<time>", value)
        value = _RV_IN_TEXT.sub(lambda m: m.group(1) + self._rv(m.group(2)), value)
        value = _POINTER.sub("<pointer>", value)
        if self.generated_re is not None:
            value = self.generated_re.sub(self._generated, value)
        return value

    def table_cell(self, cell: str) -> str:
        """A cell of ``kubectl get`` output: ages become ``<age>``."""
        cell = self.text(cell)
        return "<age>" if _AGE.fullmatch(cell) else cell
