"""The bases of the generated built-in kinds: wire names in camelCase, absent fields left
out, the source dict kept (``dict=True``: ``wk.to_dict`` writes back what a class does not
know), and for a kind its apiVersion, kind and resource."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from watchkeeper.client.models import ObjectMeta
from watchkeeper.client.resource import BUILTINS, Resource

__all__ = ["K8sObject", "Kind", "KindIdentity"]


class K8sObject(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True, dict=True):
    """Base of every generated type."""


class KindIdentity:
    """What ``client.api(Deployment)`` reads of a built-in kind: its resource."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource


class Kind(K8sObject):
    """A top-level object: ``apiVersion`` and ``kind`` fill themselves in."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    __wk_api_version__: ClassVar[str] = ""
    __wk_kind__: ClassVar[str] = ""

    def __post_init__(self) -> None:
        cls = type(self)
        self.api_version = self.api_version or cls.__wk_api_version__
        self.kind = self.kind or cls.__wk_kind__

    @classmethod
    def identity(cls) -> KindIdentity:
        for r in BUILTINS:
            if (r.api_version, r.kind) == (cls.__wk_api_version__, cls.__wk_kind__):
                return KindIdentity(r)
        raise LookupError(f"{cls.__wk_kind__} is not among the built-in resources")
