"""A ConfigMap as a typed operator would declare it (controller_throughput's
``watchkeeper-typed`` client): a module of its own, imported by that client only."""

from __future__ import annotations

import msgspec

import watchkeeper as wk


class ConfigMap(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True, dict=True):
    """``dict=True``: ``wk.from_dict`` keeps the source, so ``wk.to_dict`` writes back
    what the class does not declare."""

    api_version: str = "v1"
    kind: str = "ConfigMap"
    metadata: wk.ObjectMeta = msgspec.field(default_factory=wk.ObjectMeta)
    data: dict[str, str] = {}
    binary_data: dict[str, bytes] = {}
    immutable: bool | None = None
