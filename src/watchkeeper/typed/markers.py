"""What a field's annotation can say beyond ``msgspec.Meta``: the Kubernetes extensions of
OpenAPI (list types, CEL rules, embedded resources, preserved fields) and the two
Kubernetes value types (int-or-string, quantity).

Each marker goes into ``Annotated[T, marker]`` next to any ``msgspec.Meta``; the class
itself may stand for a marker without arguments (``Annotated[list[str], ListSet]``).
A ``Rule`` is also a class decorator, for rules over several fields of one object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

__all__ = [
    "QUANTITY_PATTERN",
    "EmbeddedResource",
    "IntOrString",
    "ListAtomic",
    "ListMap",
    "ListSet",
    "PreserveUnknownFields",
    "Quantity",
    "Rule",
    "class_rules",
]

_C = TypeVar("_C", bound=type)

RULES_ATTR = "__wk_rules__"


@dataclass(frozen=True, init=False)
class ListMap:
    """``x-kubernetes-list-type: map``: the items are objects identified by ``keys``;
    server-side apply merges them by key and the server rejects two items with one key.
    Each key must be a scalar field of the item that is required or has a default."""

    keys: tuple[str, ...]

    def __init__(self, key: str, *more: str) -> None:
        object.__setattr__(self, "keys", (key, *more))


@dataclass(frozen=True)
class ListSet:
    """``x-kubernetes-list-type: set``: scalar items, each at most once, merged as a set
    (a ``set[T]`` or ``frozenset[T]`` field is one without the marker)."""


@dataclass(frozen=True)
class ListAtomic:
    """``x-kubernetes-list-type: atomic``: the list is replaced whole by server-side apply
    (the default for a list without a list type)."""


@dataclass(frozen=True)
class PreserveUnknownFields:
    """``x-kubernetes-preserve-unknown-fields: true``: the server keeps fields the schema
    does not name, instead of pruning them (a ``dict[str, Any]`` or ``Any`` field has it
    already)."""


@dataclass(frozen=True)
class EmbeddedResource:
    """``x-kubernetes-embedded-resource: true``: the value is a whole Kubernetes object
    (apiVersion, kind, metadata), such as a pod template; the server validates its
    metadata. On a ``dict[str, Any]`` its other fields are kept as they are."""


@dataclass(frozen=True)
class Rule:
    """A CEL validation rule (``x-kubernetes-validations``), checked by the API server on
    every write: on a field as ``Annotated[T, Rule(...)]`` (``self`` is the field's
    value), or over an object's fields as a class decorator, ``@Rule(...)`` (``self`` is
    the object, fields by their wire names: ``self.minReplicas``). ``oldSelf`` makes a
    transition rule (checked on updates only).

    ``message`` is what the 422 says when the rule is false; ``message_expression`` a CEL
    expression that builds it; ``reason`` and ``field_path`` refine the 422's cause
    (Kubernetes 1.28 and later)."""

    rule: str
    message: str | None = None
    message_expression: str | None = None
    reason: Literal["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired",
                    "FieldValueDuplicate"] | None = None
    field_path: str | None = None

    def __call__(self, cls: _C) -> _C:
        """Decorate a class: the rule is checked on each object of it. Several decorators
        keep their order from top to bottom."""
        setattr(cls, RULES_ATTR, (self, *cls.__dict__.get(RULES_ATTR, ())))
        return cls

    def schema(self) -> dict[str, Any]:
        """The ``x-kubernetes-validations`` entry."""
        out: dict[str, Any] = {"rule": self.rule}
        for key, value in (("message", self.message),
                           ("messageExpression", self.message_expression),
                           ("reason", self.reason), ("fieldPath", self.field_path)):
            if value is not None:
                out[key] = value
        return out


def class_rules(cls: type) -> list[Rule]:
    """The rules declared on ``cls`` and its bases (the bases' first)."""
    out: list[Rule] = []
    for klass in reversed(cls.__mro__):
        out.extend(klass.__dict__.get(RULES_ATTR, ()))
    return out


@dataclass(frozen=True)
class _QuantityMarker:
    """Marks ``Quantity``: int-or-string restricted to the quantity syntax."""


QUANTITY = _QuantityMarker()

QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
"""The syntax of a Kubernetes ``resource.Quantity`` as its OpenAPI schema states it."""

IntOrString: TypeAlias = int | str
"""An integer or a string (``x-kubernetes-int-or-string``), like ``maxUnavailable: 25%``.
The union ``int | str`` itself means the same."""

Quantity: TypeAlias = Annotated[int | str, QUANTITY]
"""A Kubernetes quantity: ``128Mi``, ``0.5``, ``2`` (int-or-string with the quantity
pattern)."""
