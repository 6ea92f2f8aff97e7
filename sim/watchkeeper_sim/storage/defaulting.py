"""Structural defaulting of custom resources, as apiextensions does it before validation: a
null where the schema is not nullable is dropped, then a property with a ``default`` that
is absent gets a copy of it, and defaulting goes on inside every value, defaulted ones
included (apiextensions-apiserver pkg/apiserver/schema/defaulting: ``Default`` and
``PruneNonNullableNullsWithoutDefaults``). So ``replicas: null`` becomes the default and a
required ``port: null`` is "Required value", as on kube-apiserver 1.28."""

from __future__ import annotations

import copy
from typing import Any

from watchkeeper_sim.model import JSON

__all__ = ["apply_defaults"]


def apply_defaults(value: Any, schema: JSON | None) -> None:
    """Fill ``value`` (an object as decoded, in place) from ``schema``'s defaults."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        for key, sub in props.items():
            if not isinstance(sub, dict) or key not in value or value[key] is not None:
                continue
            if not sub.get("nullable"):
                del value[key]  # a null the schema does not allow: as if absent
        for key, sub in props.items():
            if isinstance(sub, dict) and "default" in sub and key not in value:
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                apply_defaults(item, props[key])
            elif isinstance(extra, dict):
                apply_defaults(item, extra)
    elif isinstance(value, list):
        for item in value:
            apply_defaults(item, schema.get("items"))
