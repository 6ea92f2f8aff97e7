"""Every constraint a type hint can state, and the exact schema fragment it becomes (the
generated schema is what the API server enforces; the e2e test shows it does)."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Annotated, Any, Literal, Optional

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.typed.markers import QUANTITY
from watchkeeper.typed.structural import problems


def prop(cls: type[msgspec.Struct], name: str) -> dict[str, Any]:
    """The schema of one field (by its wire name) of ``cls``."""
    node: dict[str, Any] = wk.openapi_schema(cls)["properties"][name]
    return node


# -- required, optional, nullable, defaults ---------------------------------------------------


class Basics(wk.Schema, kw_only=True):
    """Docstring of the object."""

    needed: str
    with_default: int = 3
    maybe: int | None = None
    maybe_required: int | None
    unset: int | msgspec.UnsetType = msgspec.UNSET
    old_optional: Optional[str] = None  # noqa: UP045 - the old spelling means the same


def test_a_field_without_default_is_required_and_names_are_camel_case() -> None:
    schema = wk.openapi_schema(Basics)
    assert schema["type"] == "object" and schema["description"] == "Docstring of the object."
    assert list(schema["properties"]) == ["needed", "withDefault", "maybe", "maybeRequired",
                                          "unset", "oldOptional"]
    assert schema["required"] == ["needed", "maybeRequired"]


def test_defaults_nullable_and_unset() -> None:
    assert prop(Basics, "withDefault") == {"type": "integer", "default": 3}
    # T | None: null is a value the server keeps; a None default is no default
    assert prop(Basics, "maybe") == {"type": "integer", "nullable": True}
    assert prop(Basics, "maybeRequired") == {"type": "integer", "nullable": True}
    assert prop(Basics, "oldOptional") == {"type": "string", "nullable": True}
    # UNSET: optional, not nullable, no default (Go's omitempty)
    assert prop(Basics, "unset") == {"type": "integer"}


class Tier(enum.Enum):
    """The service level."""

    FREE = "free"
    PAID = "paid"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Inner(wk.Schema):
    """An inner object."""

    size: int = 1
    name: str = "x"


class Defaults(wk.Schema):
    text: str = "a"
    flag: bool = False
    ratio: float = 0.5
    items: list[str] = msgspec.field(default_factory=lambda: ["a", "b"])
    empty: list[int] = []
    labels: dict[str, str] = {}
    tier: Tier = Tier.PAID
    inner: Inner = msgspec.field(default_factory=Inner)
    inner_set: Inner = msgspec.field(default_factory=lambda: Inner(size=2))
    when: datetime.datetime = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.mark.parametrize(("name", "default"), [
    ("text", "a"), ("flag", False), ("ratio", 0.5), ("items", ["a", "b"]), ("empty", []),
    ("labels", {}), ("tier", "paid"),
    ("inner", {}),  # an object default of {} lets the server fill the inner defaults
    ("inner_set", {"size": 2}),  # only what differs from the inner defaults
    ("when", "2024-01-02T03:04:05Z"),
])
def test_each_default_is_the_wire_value(name: str, default: Any) -> None:
    wire = {"inner_set": "innerSet"}.get(name, name)
    assert prop(Defaults, wire)["default"] == default


# -- enums ------------------------------------------------------------------------------------


class Enums(wk.Schema):
    size: Literal["small", "large"]
    count: Literal[1, 2, 3] = 1
    maybe: Literal["a", "b", None] = None
    tier: Tier = Tier.FREE
    level: Level = Level.LOW


def test_literal_and_enum_become_enums() -> None:
    assert prop(Enums, "size") == {"type": "string", "enum": ["small", "large"]}
    assert prop(Enums, "count") == {"type": "integer", "enum": [1, 2, 3], "default": 1}
    assert prop(Enums, "maybe") == {"type": "string", "enum": ["a", "b"], "nullable": True}
    assert prop(Enums, "tier") == {"description": "The service level.", "type": "string",
                                   "enum": ["free", "paid"], "default": "free"}
    assert prop(Enums, "level") == {"type": "integer", "enum": [1, 2], "default": 1}


# -- msgspec.Meta: bounds, lengths, pattern, docs ----------------------------------------------


class Bounds(wk.Schema):
    inclusive: Annotated[int, msgspec.Meta(ge=1, le=10)]
    exclusive: Annotated[float, msgspec.Meta(gt=0, lt=1)]
    step: Annotated[int, msgspec.Meta(multiple_of=5)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=63, pattern="^[a-z]+$")]
    tags: Annotated[list[str], msgspec.Meta(min_length=1, max_length=5)]
    labels: Annotated[dict[str, str], msgspec.Meta(min_length=1, max_length=3)]
    shown: Annotated[str, msgspec.Meta(title="Shown", examples=["one", "two"],
                                       extra_json_schema={"format": "hostname"})]
    bounded_optional: Annotated[int, msgspec.Meta(ge=0)] | None = None


def test_bounds_lengths_and_patterns() -> None:
    assert prop(Bounds, "inclusive") == {"type": "integer", "minimum": 1, "maximum": 10}
    assert prop(Bounds, "exclusive") == {"type": "number", "minimum": 0, "exclusiveMinimum": True,
                                         "maximum": 1, "exclusiveMaximum": True}
    assert prop(Bounds, "step") == {"type": "integer", "multipleOf": 5}
    assert prop(Bounds, "name") == {"type": "string", "minLength": 1, "maxLength": 63,
                                    "pattern": "^[a-z]+$"}
    assert prop(Bounds, "tags") == {"type": "array", "minItems": 1, "maxItems": 5,
                                    "items": {"type": "string"}}
    assert prop(Bounds, "labels") == {"type": "object", "minProperties": 1, "maxProperties": 3,
                                      "additionalProperties": {"type": "string"}}
    assert prop(Bounds, "shown") == {"title": "Shown", "type": "string", "format": "hostname",
                                     "example": "one"}
    assert prop(Bounds, "boundedOptional") == {"type": "integer", "nullable": True,
                                               "minimum": 0}


def test_msgspec_enforces_the_same_bounds_in_python() -> None:
    """The class validates as the server does (one declaration, both ends)."""
    ok = {"inclusive": 10, "exclusive": 0.5, "step": 10, "name": "ab", "tags": ["x"],
          "labels": {"a": "b"}, "shown": "s"}
    assert msgspec.convert(ok, Bounds).inclusive == 10
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int` <= 10 - at `\$.inclusive`"):
        msgspec.convert({**ok, "inclusive": 11}, Bounds)


# -- formats, int-or-string, quantities ----------------------------------------------------


class Formats(wk.Schema):
    when: datetime.datetime
    day: datetime.date
    data: bytes
    id: uuid.UUID
    surge: wk.IntOrString
    plain_union: int | str
    memory: wk.Quantity
    memory_default: wk.Quantity = "1Gi"


def test_formats_int_or_string_and_quantity() -> None:
    assert prop(Formats, "when") == {"type": "string", "format": "date-time"}
    assert prop(Formats, "day") == {"type": "string", "format": "date"}
    assert prop(Formats, "data") == {"type": "string", "format": "byte"}
    assert prop(Formats, "id") == {"type": "string", "format": "uuid"}
    int_or_string = {"x-kubernetes-int-or-string": True}
    assert prop(Formats, "surge") == prop(Formats, "plainUnion") == int_or_string
    assert prop(Formats, "memory") == {"pattern": wk.QUANTITY_PATTERN, **int_or_string}
    assert prop(Formats, "memoryDefault") == {"default": "1Gi", "pattern": wk.QUANTITY_PATTERN,
                                              **int_or_string}


def test_the_quantity_pattern_takes_kubernetes_quantities() -> None:
    import re

    good = ["1", "0.5", "128Mi", "1Gi", "500m", "1e3", "+2k", ".5"]
    bad = ["12 GB", "1GB", "Mi", "", "1.2.3"]
    assert [q for q in good if not re.search(wk.QUANTITY_PATTERN, q)] == []
    assert [q for q in bad if re.search(wk.QUANTITY_PATTERN, q)] == []


# -- maps, lists and list types, preserved and embedded objects ------------------------------


class Port(wk.Schema):
    name: str
    port: int
    protocol: str = "TCP"


class Lists(wk.Schema):
    ports: Annotated[list[Port], wk.ListMap("name")] = []
    by_two: Annotated[list[Port], wk.ListMap("name", "protocol")] = []
    tags: Annotated[list[str], wk.ListSet()] = []
    bare_marker: Annotated[list[str], wk.ListSet] = []
    python_set: set[str] = set()
    frozen: frozenset[int] = frozenset()
    atomic: Annotated[list[str], wk.ListAtomic()] = []
    numbers: tuple[int, ...] = ()
    nested: dict[str, list[int]] = {}
    anything: dict[str, Any] = {}
    value: Any = None
    open_list: list[Any] = []


def test_list_types_and_maps() -> None:
    port = wk.openapi_schema(Port)
    assert prop(Lists, "ports") == {"type": "array", "default": [], "items": port,
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["name"]}
    assert prop(Lists, "byTwo")["x-kubernetes-list-map-keys"] == ["name", "protocol"]
    as_set = {"type": "array", "default": [], "items": {"type": "string"},
              "x-kubernetes-list-type": "set"}
    assert prop(Lists, "tags") == prop(Lists, "bareMarker") == prop(Lists, "pythonSet") == as_set
    assert prop(Lists, "frozen") == {**as_set, "items": {"type": "integer"}}
    assert prop(Lists, "atomic") == {"type": "array", "default": [], "items": {"type": "string"},
                                     "x-kubernetes-list-type": "atomic"}
    assert prop(Lists, "numbers") == {"type": "array", "default": [],
                                      "items": {"type": "integer"}}
    assert prop(Lists, "nested") == {"type": "object", "default": {}, "additionalProperties": {
        "type": "array", "items": {"type": "integer"}}}
    assert prop(Lists, "anything") == {"type": "object", "default": {},
                                       "x-kubernetes-preserve-unknown-fields": True}
    assert prop(Lists, "value") == {"x-kubernetes-preserve-unknown-fields": True}
    assert prop(Lists, "openList") == {"type": "array", "default": [], "items": {
        "x-kubernetes-preserve-unknown-fields": True}}


class Template(wk.Schema):
    """A pod template."""

    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = {}
    spec: dict[str, Any] = {}


class Open(wk.Schema):
    known: int = 0


class Embedding(wk.Schema):
    raw: Annotated[dict[str, Any], wk.EmbeddedResource()]
    typed: Annotated[Template, wk.EmbeddedResource]
    kept: Annotated[Open, wk.PreserveUnknownFields()]


def test_embedded_resources_and_preserved_fields() -> None:
    assert prop(Embedding, "raw") == {"type": "object", "x-kubernetes-embedded-resource": True,
                                      "x-kubernetes-preserve-unknown-fields": True}
    # an embedded resource's apiVersion, kind and metadata are the server's, as at the root
    assert prop(Embedding, "typed") == {
        "description": "A pod template.", "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "metadata": {"type": "object"},
                       "spec": {"type": "object", "default": {},
                                "x-kubernetes-preserve-unknown-fields": True}},
        "x-kubernetes-embedded-resource": True}
    assert prop(Embedding, "kept") == {
        "type": "object", "properties": {"known": {"type": "integer", "default": 0}},
        "x-kubernetes-preserve-unknown-fields": True}


# -- CEL rules ----------------------------------------------------------------------------


@wk.Rule("self.min <= self.max", message="min must not exceed max")
@wk.Rule("self.max - self.min < 100", message_expression="'range too wide: ' + "
         "string(self.max - self.min)", reason="FieldValueForbidden", field_path=".max")
class Range(wk.Schema):
    min: int = 0
    max: int = 10
    name: Annotated[str, wk.Rule("self == oldSelf", message="name is immutable")] = ""


class Wider(Range):
    extra: int = 0


def test_cel_rules_on_a_class_and_a_field_in_order() -> None:
    schema = wk.openapi_schema(Range)
    assert schema["x-kubernetes-validations"] == [
        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
        {"rule": "self.max - self.min < 100",
         "messageExpression": "'range too wide: ' + string(self.max - self.min)",
         "reason": "FieldValueForbidden", "fieldPath": ".max"},
    ]
    assert schema["properties"]["name"] == {
        "type": "string", "default": "",
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]}
    # a subclass keeps its bases' rules
    assert wk.openapi_schema(Wider)["x-kubernetes-validations"] == schema[
        "x-kubernetes-validations"]


# -- descriptions -------------------------------------------------------------------------


class Documented(wk.Schema):
    """The object.

    Its second paragraph, wrapped
    over two lines."""

    plain: int = 0
    """The field's docstring,
    joined into one line."""
    described: Annotated[int, msgspec.Meta(description="From Meta.")] = 0
    """Loses to Meta."""
    inner: Inner = msgspec.field(default_factory=Inner)
    inner_documented: Inner = msgspec.field(default_factory=Inner)
    """The field's own words win over the type's."""
    undocumented: int = 0


def test_docstrings_become_descriptions() -> None:
    schema = wk.openapi_schema(Documented)
    assert schema["description"] == "The object.\n\nIts second paragraph, wrapped over two lines."
    props = schema["properties"]
    assert props["plain"]["description"] == "The field's docstring, joined into one line."
    assert props["described"]["description"] == "From Meta."
    assert props["inner"]["description"] == "An inner object."
    assert props["innerDocumented"]["description"] == "The field's own words win over the type's."
    assert "description" not in props["undocumented"]


# -- what cannot be a schema: one SchemaError naming the field -----------------------------


class Keyless(wk.Schema):
    key: str | msgspec.UnsetType = msgspec.UNSET


class Node(wk.Schema):
    children: list[Node] = []


def _bad(annotation: Any, default: Any = msgspec.NODEFAULT) -> type[msgspec.Struct]:
    fields: list[Any] = [("f", annotation) if default is msgspec.NODEFAULT
                         else ("f", annotation, default)]
    return msgspec.defstruct("Bad", fields, bases=(wk.Schema,))


@pytest.mark.parametrize(("annotation", "message"), [
    (int | float, r"Bad.f: the union .* has no structural schema"),
    (complex, r"Bad.f: <class 'complex'> has no Kubernetes schema"),
    (dict[int, str], r"Bad.f: map keys must be str"),
    (Literal["a", 1], r"Bad.f: enum values must all be str, or all int"),
    (Annotated[str, msgspec.Meta(extra_json_schema={"uniqueItems": True})],
     r"uniqueItems cannot be true"),
    (Annotated[str, msgspec.Meta(extra_json_schema={"examples": ["x"]})],
     r"examples: not a keyword of a CRD schema"),
    (Annotated[list[Port], wk.ListMap("nam")],
     r"Bad.f: ListMap key 'nam' is not a field of the items \(they have name, port, protocol"),
    (Annotated[list[Keyless], wk.ListMap("key")], r"ListMap key 'key' must be required or have"),
    (Annotated[list[str], wk.ListMap("name")], r"ListMap needs a list of objects"),
    (Annotated[list[Port], wk.ListMap], r"ListMap needs its keys"),
    (Annotated[dict[str, str], wk.ListSet()], r"ListSet is for a list, not object"),
    (Annotated[list[Port], wk.ListSet()], r"a set holds scalars"),
    (Annotated[set[str], wk.ListAtomic()], r"a set is a set list"),
    (Annotated[int, wk.EmbeddedResource()], r"EmbeddedResource is for an object"),
    (Annotated[int, wk.PreserveUnknownFields()], r"PreserveUnknownFields is for an object"),
    (Annotated[int, QUANTITY], r"Quantity is int \| str"),
])
def test_what_kubernetes_cannot_take_is_refused_naming_the_field(annotation: Any,
                                                               message: str) -> None:
    with pytest.raises(wk.SchemaError, match=message):
        wk.openapi_schema(_bad(annotation))


def test_a_recursive_type_is_refused() -> None:
    with pytest.raises(wk.SchemaError, match=r"Node -> Node: a Kubernetes schema cannot contain"):
        wk.openapi_schema(Node)


def test_a_class_defined_in_a_function_is_explained() -> None:
    class Local(wk.Schema):
        size: int = 1

    class Outer(wk.Schema):
        inner: Local

    with pytest.raises(wk.SchemaError, match=r"Outer: an annotation names what its module does "
                       r"not have \(name 'Local' is not defined\).*define it at module level"):
        wk.openapi_schema(Outer)


def test_a_schema_error_is_a_type_error_and_a_watchkeeper_error() -> None:
    assert issubclass(wk.SchemaError, TypeError) and issubclass(wk.SchemaError,
                                                                wk.WatchkeeperError)


# -- the structural rules, checked on their own -------------------------------------------


@pytest.mark.parametrize(("schema", "problem"), [
    ({"type": "object", "properties": {"a": {}}}, ".a: needs a type"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {},
                                             "additionalProperties": {"type": "string"}}}},
     ".a: properties and additionalProperties are mutually exclusive"),
    ({"type": "object", "additionalProperties": False},
     "<root>: additionalProperties must be a schema"),
    ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "labels": {"type": "object"}}}}}, ".metadata: only name and generateName"),
    ({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}},
     ".metadata: only type: object"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "$ref": "#/x"}, "<root>: $ref is not allowed"),
    ({"type": "string", "x-kubernetes-int-or-string": True}, "must not have a type"),
    ({"type": "string", "anyOf": [{"type": "string", "description": "x"}]},
     "type is not allowed inside anyOf"),
    ({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}},
      "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]},
     "list map key 'k' must be required or have a default"),
    ({"type": "string", "x-kubernetes-list-type": "set"}, "x-kubernetes-list-type is for arrays"),
    ({"type": "string", "x-kubernetes-embedded-resource": True}, "needs type: object"),
    ({"type": "string", "x-kubernetes-validations": [{"rule": ""}]}, "non-empty rule"),
    ({"type": "wat"}, "type 'wat' is not one of"),
])
def test_the_structural_check_finds_each_rule_broken(schema: dict[str, Any],
                                                     problem: str) -> None:
    found = problems(schema)
    assert any(problem in p for p in found), found


def test_every_schema_of_this_file_is_structural() -> None:
    for cls in (Basics, Defaults, Enums, Bounds, Formats, Lists, Embedding, Range, Documented):
        assert problems(wk.openapi_schema(cls)) == [], cls
