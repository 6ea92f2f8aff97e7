"""``TypedStore[T]``: a ``Store`` read as instances of a class.

The store keeps compressed JSON and decodes a new dict on every read; a typed read converts
that dict, for the object asked for only, so a typed view costs nothing until it is read
and an object that nobody reads is never converted."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Generic, TypeVar

from watchkeeper.cache.store import Store
from watchkeeper.client.models import from_dict

__all__ = ["TypedStore"]

T = TypeVar("T")


class TypedStore(Generic[T]):
    """The objects of ``store`` as ``cls`` (``msgspec.ValidationError`` for one that does
    not fit the class). Each read is a new object: changing it changes nothing cached."""

    def __init__(self, store: Store, cls: type[T]) -> None:
        self.store = store
        self.cls = cls

    def __repr__(self) -> str:
        return f"TypedStore({self.cls.__qualname__}, {len(self.store)} objects)"

    def get(self, name: str, *, namespace: str | None = None) -> T | None:
        obj = self.store.get(name, namespace=namespace)
        return None if obj is None else from_dict(self.cls, obj)

    def list(self) -> builtins.list[T]:
        return [from_dict(self.cls, o) for o in self.store.list()]

    def by_index(self, name: str, value: str) -> builtins.list[T]:
        return [from_dict(self.cls, o) for o in self.store.by_index(name, value)]

    def __iter__(self) -> Iterator[T]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, key: object) -> bool:
        return key in self.store

    @property
    def ready(self) -> bool:
        return self.store.ready

    async def wait_until_ready(self, timeout: float | None = None) -> None:
        await self.store.wait_until_ready(timeout)
