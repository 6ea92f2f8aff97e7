"""The base classes a custom resource is written with, and the decorator that names it.

``Schema`` is a ``msgspec.Struct`` whose fields are snake_case in Python and camelCase on
the wire (``min_replicas`` is ``minReplicas``), and left out when equal to their default.
``CustomResource`` adds ``apiVersion``, ``kind`` and ``metadata``; a subclass
declares ``spec`` (and ``status``) and ``@custom_resource(...)`` gives it its identity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, ClassVar, Literal, TypeVar

import msgspec

from watchkeeper.client.models import ObjectMeta
from watchkeeper.typed.errors import SchemaError
from watchkeeper.typed.identity import PrinterColumn, ResourceIdentity, Scale, Scope
from watchkeeper.typed.markers import ListMap

__all__ = ["Condition", "Conditions", "CustomResource", "Schema", "custom_resource"]

IDENTITY_ATTR = "__wk_identity__"

_R = TypeVar("_R", bound="type[CustomResource]")


class Schema(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of the objects inside a custom resource (spec, status and their parts).

    As in a dataclass, required fields come before those with defaults, unless the class
    says ``kw_only=True`` (``class Spec(wk.Schema, kw_only=True)``)."""


class CustomResource(Schema, kw_only=True, dict=True):
    """Base of a custom resource: subclass it, declare ``spec`` and ``status``, and
    decorate the subclass with ``@wk.custom_resource(group=..., version=...)``.

    ``dict=True``: an object read by a ``TypedApi`` keeps the dict it came from, so a
    write gives back the fields the class does not declare."""

    api_version: str = ""
    """APIVersion defines the versioned schema of this representation of an object.
    Servers should convert recognized schemas to the latest internal value, and may reject
    unrecognized values. More info:
    https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"""
    kind: str = ""
    """Kind is a string value representing the REST resource this object represents.
    Servers may infer this from the endpoint the client submits requests to. Cannot be
    updated. In CamelCase. More info:
    https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    """Standard object's metadata (the API server's ObjectMeta)."""

    __wk_identity__: ClassVar[ResourceIdentity | None] = None

    def __post_init__(self) -> None:
        identity = type(self).__wk_identity__
        if identity is not None:
            self.api_version = self.api_version or identity.api_version
            self.kind = self.kind or identity.kind

    @classmethod
    def identity(cls) -> ResourceIdentity:
        """Group, version, names, scope: what ``@wk.custom_resource`` declared."""
        identity = cls.__wk_identity__
        if identity is None:
            raise SchemaError(f"{cls.__qualname__} has no identity: decorate it with "
                              "@wk.custom_resource(group=..., version=...)")
        return identity


def custom_resource(
    *,
    group: str,
    version: str,
    kind: str | None = None,
    plural: str | None = None,
    singular: str | None = None,
    list_kind: str | None = None,
    scope: Scope = "Namespaced",
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    served: bool = True,
    storage: bool | None = None,
    deprecated: bool = False,
    deprecation_warning: str | None = None,
    printer_columns: Sequence[PrinterColumn] = (),
    status_subresource: bool | None = None,
    scale: Scale | None = None,
) -> Callable[[_R], _R]:
    """Name a ``CustomResource`` subclass: group, version, kind (the class name unless
    given), plural (lowercase kind + "s"), scope, short names, categories, whether this
    version is served, stored or deprecated, its printer columns and subresources. The
    status subresource is on when the class has a ``status`` field; ``scale`` adds the
    scale subresource."""

    def decorate(cls: _R) -> _R:
        if not (isinstance(cls, type) and issubclass(cls, CustomResource)):
            raise SchemaError(f"@custom_resource decorates a subclass of wk.CustomResource, "
                              f"not {cls!r}")
        k = kind or cls.__name__
        identity = ResourceIdentity(
            group=group, version=version, kind=k, plural=plural or k.lower() + "s",
            singular=singular or k.lower(), list_kind=list_kind or k + "List", scope=scope,
            short_names=tuple(short_names), categories=tuple(categories), served=served,
            storage=storage, deprecated=deprecated, deprecation_warning=deprecation_warning,
            printer_columns=tuple(printer_columns), status_subresource=status_subresource,
            scale=scale)
        identity.check(cls.__qualname__)
        setattr(cls, IDENTITY_ATTR, identity)
        return cls

    return decorate


_CONDITION_TYPE = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")


class Condition(Schema):
    """Condition contains details for one aspect of the current state of this API Resource
    (the schema of Kubernetes' metav1.Condition)."""

    type: Annotated[str, msgspec.Meta(pattern=_CONDITION_TYPE, max_length=316)]
    """type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: Literal["True", "False", "Unknown"]
    """status of the condition, one of True, False, Unknown."""
    last_transition_time: datetime
    """lastTransitionTime is the last time the condition transitioned from one status to
    another. This should be when the underlying condition changed. If that is not known,
    then using the time when the API field changed is acceptable."""
    reason: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                                        min_length=1, max_length=1024)]
    """reason contains a programmatic identifier indicating the reason for the condition's
    last transition. The value should be a CamelCase string. This field may not be empty."""
    message: Annotated[str, msgspec.Meta(max_length=32768)] = ""
    """message is a human readable message indicating details about the transition. This
    may be an empty string."""
    observed_generation: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """observedGeneration represents the .metadata.generation that the condition was set
    based upon. If it is older than .metadata.generation, the condition is out of date
    with respect to the current state of the instance."""


Conditions = Annotated[list[Condition], ListMap("type")]
"""``status.conditions`` as Kubernetes declares them: a list merged by ``type``."""
