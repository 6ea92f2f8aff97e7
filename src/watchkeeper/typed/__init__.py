"""Custom resources as Python classes: one class is the schema, the validation and the
documentation, and its CRD is generated from it.

One job per module: ``markers`` (what Annotated adds: list types, CEL rules, int-or-string,
quantities), ``models`` (``Schema``, ``CustomResource``, ``@custom_resource``,
``Condition``), ``conditions`` (set and read ``status.conditions``), ``identity`` (group,
names, printer columns, subresources), ``docs`` (docstrings as descriptions), ``schema``
(a class -> its openAPIV3Schema), ``structural`` (the API server's rules for that schema),
``crd`` (classes -> CRD manifests), ``install`` (server-side apply, wait for Established),
``conversion`` (between versions, in Python), ``errors``."""

from watchkeeper.typed import conditions
from watchkeeper.typed.conversion import CONVERSION_ANNOTATION, conversion, convert
from watchkeeper.typed.crd import crd, crds
from watchkeeper.typed.errors import CRDNotEstablished, SchemaError
from watchkeeper.typed.identity import PrinterColumn, ResourceIdentity, Scale
from watchkeeper.typed.install import install_crds
from watchkeeper.typed.markers import (
    QUANTITY_PATTERN,
    EmbeddedResource,
    IntOrString,
    ListAtomic,
    ListMap,
    ListSet,
    PreserveUnknownFields,
    Quantity,
    Rule,
)
from watchkeeper.typed.models import (
    Condition,
    Conditions,
    CustomResource,
    Schema,
    custom_resource,
)
from watchkeeper.typed.schema import openapi_schema

__all__ = [
    "CONVERSION_ANNOTATION",
    "QUANTITY_PATTERN",
    "CRDNotEstablished",
    "Condition",
    "Conditions",
    "CustomResource",
    "EmbeddedResource",
    "IntOrString",
    "ListAtomic",
    "ListMap",
    "ListSet",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Quantity",
    "ResourceIdentity",
    "Rule",
    "Scale",
    "Schema",
    "SchemaError",
    "conditions",
    "conversion",
    "convert",
    "crd",
    "crds",
    "custom_resource",
    "install_crds",
    "openapi_schema",
]
