"""Table columns of a custom resource from its CRD's additionalPrinterColumns.

As apiextensions-apiserver's tableconvertor does: the Name column, then one column per
additionalPrinterColumn of the served version (name, type, format, priority, description;
a missing description reads "Custom resource definition column (in JSONPath format): ...").
Each column's jsonPath is a client-go JSONPath template (``jsonpath.py``: filters such as
``.status.conditions[?(@.type=="Ready")].status``, ``..``, ``[*]``, unions, slices); a cell
is the first value it finds, converted by the column's type, or null when it finds nothing
or fails. A string cell prints maps and lists as JSON and null as "<no value>"; a date that
does not parse reads "<invalid>". A column whose path does not parse ends the column list
there (the apiserver keeps the columns before it). The apiserver adds no Age column of its
own: a CRD version without additionalPrinterColumns gets the default one (Age, type date, at
.metadata.creationTimestamp), one with columns shows only those.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from watchkeeper_sim.documents import jsonpath as _jsonpath
from watchkeeper_sim.model import PrinterColumn

_MISSING = object()


@lru_cache(maxsize=256)
def compile_path(path: str) -> _jsonpath.Template | None:
    """The parsed ``{path}`` template, or None when it does not parse."""
    try:
        return _jsonpath.parse("{" + path + "}")
    except _jsonpath.JSONPathError:
        return None


def usable(columns: tuple[PrinterColumn, ...]) -> tuple[PrinterColumn, ...]:
    """The columns the apiserver serves: those before the first that does not parse."""
    out: list[PrinterColumn] = []
    for column in columns:
        if compile_path(column.json_path) is None:
            break
        out.append(column)
    return tuple(out)


def first_value(obj: Any, path: str) -> Any:
    """The first value ``path`` finds in ``obj`` (AllowMissingKeys), or _MISSING."""
    tree = compile_path(path)
    if tree is None:
        return _MISSING
    try:
        results = _jsonpath.find_results(tree, obj)
    except _jsonpath.JSONPathError:
        return _MISSING
    if not results or not results[0]:
        return _MISSING
    return results[0][0]


def cell(column: PrinterColumn, obj: Mapping[str, Any], now: datetime,
         human: Any) -> Any:
    """One cell (cellForJSONValue): ``human`` turns a timestamp into an age for "date"."""
    value = first_value(obj, column.json_path)
    if value is _MISSING:
        return None
    kind = column.type
    if kind == "string":
        return _jsonpath.print_value(value)
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer" and number:
        return int(value)
    if kind == "number" and number:  # a float64; whole ones encode without a fraction
        return int(value) if float(value).is_integer() and abs(value) < 1e21 else float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        if value in ("", "null"):  # metav1.Time's zero value
            return "<unknown>"
        return "<invalid>" if parse_time(value) is None else human(value, now)
    return None


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 time as metav1.Time accepts it; None when it does not parse."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else None


def definition(column: PrinterColumn) -> dict[str, Any]:
    """The Table column definition of one additionalPrinterColumn."""
    return {"name": column.name, "type": column.type, "format": column.format,
            "description": column.description or (
                "Custom resource definition column (in JSONPath format): "
                f"{column.json_path}"),
            "priority": column.priority}
