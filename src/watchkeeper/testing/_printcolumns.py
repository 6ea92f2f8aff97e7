"""Table columns of a custom resource from its CRD's additionalPrinterColumns.

As apiextensions-apiserver's tableconvertor does: the Name column, then one column per
additionalPrinterColumn of the served version (name, type, format, priority, description;
a missing description reads "Custom resource definition column (in JSONPath format): ..."),
each cell the value at the column's simple JSONPath (``.spec.size``, ``.status.conditions[0]
.type``, ``.metadata.labels['app.kubernetes.io/name']``) converted by the column's type; a
path that finds nothing gives a null cell. The apiserver adds no Age column of its own: a CRD
version without additionalPrinterColumns gets the default one (Age, type date, at
.metadata.creationTimestamp), one with columns shows only those (the usual CRD lists Age
itself).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from watchkeeper.testing._store import PrinterColumn

_STEP = re.compile(r"""\.([A-Za-z0-9_\-$]+)|\[(\d+)\]|\[['"]([^'"]*)['"]\]""")
_MISSING = object()


def parse_path(path: str) -> list[str | int] | None:
    """The steps of a simple JSONPath (fields and list indexes), None if it is not one."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            return None
        field, index, quoted = m.groups()
        steps.append(int(index) if index is not None else (field if field is not None
                                                             else quoted))
        pos = m.end()
    return steps or None


def lookup(obj: Any, path: str) -> Any:
    """The value at ``path`` in ``obj``, or _MISSING (JSONPath with AllowMissingKeys)."""
    steps = parse_path(path)
    if steps is None:
        return _MISSING
    value = obj
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return _MISSING
            value = value[step]
    return value


def go_text(value: Any) -> str:
    """fmt.Fprint of a decoded JSON value, as JSONPath prints a "string" column's cell."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_text(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    return str(value)


def _go_float(value: float) -> str:
    """%v of a float64: the shortest digits, plain between 1e-4 and 1e21, else like 1e+21."""
    if value != value or value in (float("inf"), float("-inf")):
        return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")
    exact = Decimal(repr(value))
    exponent = exact.adjusted()
    if -4 <= exponent < 21:
        text = format(exact, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    digits = exact.scaleb(-exponent).normalize()
    mantissa = format(digits, "f")
    return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def cell(column: PrinterColumn, obj: Mapping[str, Any], now: datetime,
         human: Any) -> Any:
    """One cell (cellForJSONValue): ``human`` turns a timestamp into an age for "date"."""
    value = lookup(obj, column.json_path)
    if value is _MISSING or value is None:
        return None
    kind = column.type
    if kind == "string":
        return go_text(value)
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        return human(value, now)
    return None


def definition(column: PrinterColumn) -> dict[str, Any]:
    """The Table column definition of one additionalPrinterColumn."""
    return {"name": column.name, "type": column.type, "format": column.format,
            "description": column.description or (
                "Custom resource definition column (in JSONPath format): "
                f"{column.json_path}"),
            "priority": column.priority}
