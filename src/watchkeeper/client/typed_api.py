"""``TypedApi[T]``: the verbs of an ``Api`` with objects as instances of a class.

``client.api(Website)`` builds one for a ``wk.CustomResource`` class (its identity names
the resource); ``TypedApi(client.api("configmaps"), ConfigMap)`` for any msgspec class.
Reads convert the server's dict (``models.from_dict``: validated, the dict kept); writes
send ``models.to_dict``, so what the class does not declare is written back as it came."""

from __future__ import annotations

import builtins
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from watchkeeper.client.api import Api, PatchType
from watchkeeper.client.models import from_dict, to_dict
from watchkeeper.client.resource import Resource

__all__ = ["Identified", "TypedApi"]

T = TypeVar("T")
JSON = dict[str, Any]


class _Identity(Protocol):
    @property
    def resource(self) -> Resource: ...


class Identified(Protocol):
    """A class that names its resource (``wk.CustomResource`` subclasses do): what
    ``client.api(cls)`` takes. A protocol, so that the client does not import ``typed``."""

    @classmethod
    def identity(cls) -> _Identity: ...


def _where(obj: JSON) -> tuple[str, str | None]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError("the object has no metadata.name")
    return name, meta.get("namespace")


class TypedApi(Generic[T]):
    """The verbs on one resource, objects as ``cls``; ``api`` is the untyped ``Api`` under
    it (a ``Controller`` or ``reflector`` takes it)."""

    def __init__(self, api: Api, cls: builtins.type[T]) -> None:
        self.api = api
        self.cls = cls

    def __repr__(self) -> str:
        return f"TypedApi({self.cls.__qualname__}, {self.api!r})"

    def typed(self, obj: JSON) -> T:
        """One object as the server sent it, as a ``cls`` (``msgspec.ValidationError`` if
        it does not fit)."""
        return from_dict(self.cls, obj)

    # -- reads ---------------------------------------------------------------------------

    async def get(self, name: str, *, namespace: str | None = None) -> T:
        return self.typed(await self.api.get(name, namespace=namespace))

    async def list(
        self, *, label_selector: str | None = None, field_selector: str | None = None,
    ) -> builtins.list[T]:
        """Every object (all pages)."""
        page = await self.api.list_all(label_selector=label_selector,
                                       field_selector=field_selector)
        return [self.typed(o) for o in page.items]

    # -- writes --------------------------------------------------------------------------

    async def create(
        self, obj: T, *, dry_run: bool = False, field_manager: str | None = None
    ) -> T:
        body = to_dict(obj)
        return self.typed(await self.api.create(body, dry_run=dry_run,
                                                field_manager=field_manager))

    async def replace(
        self, obj: T, *, dry_run: bool = False, field_manager: str | None = None
    ) -> T:
        """PUT the whole object (its ``metadata.resourceVersion`` makes it conditional: a
        ``wk.Conflict`` if the object changed since it was read)."""
        body = to_dict(obj)
        name, _ = _where(body)
        return self.typed(await self.api.replace(name, body, dry_run=dry_run,
                                                 field_manager=field_manager))

    async def replace_status(self, obj: T) -> T:
        body = to_dict(obj)
        name, _ = _where(body)
        return self.typed(await self.api.replace_status(name, body))

    async def patch(
        self, name: str, patch: Any, *, type: PatchType = "merge",
        field_manager: str | None = None, force: bool = False, namespace: str | None = None,
        subresource: str | None = None,
    ) -> T:
        """A patch (a dict, or a Struct of the patch's shape) -> the object after it."""
        body = patch if isinstance(patch, (dict, builtins.list)) else msgspec.to_builtins(patch)
        return self.typed(await self.api.patch(
            name, body, type=type, field_manager=field_manager, force=force,
            namespace=namespace, subresource=subresource))

    async def patch_status(self, name: str, patch: Any, *, type: PatchType = "merge",
                           namespace: str | None = None) -> T:
        return await self.patch(name, patch, type=type, namespace=namespace,
                                subresource="status")

    async def apply(
        self, obj: T, *, field_manager: str, force: bool = False,
        subresource: Literal["status"] | None = None,
    ) -> T:
        """Server-side apply of what ``obj`` declares, and only that (fields equal to their
        class default are left out, so not owned; fields the class does not know are not
        sent either): the field manager owns exactly these fields."""
        body = msgspec.to_builtins(obj)
        body.get("metadata", {}).pop("managedFields", None)  # refused in an apply
        name, ns = _where(body)
        return self.typed(await self.api.patch(
            name, body, type="apply", field_manager=field_manager, force=force, namespace=ns,
            subresource=subresource))

    async def apply_status(self, obj: T, *, field_manager: str, force: bool = False) -> T:
        return await self.apply(obj, field_manager=field_manager, force=force,
                                subresource="status")

    async def delete(self, name: str, *, namespace: str | None = None) -> JSON:
        """The server's answer: a Status, or the object while finalizers hold it."""
        return await self.api.delete(name, namespace=namespace)
