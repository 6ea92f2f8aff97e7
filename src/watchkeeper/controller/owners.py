"""Owner references, which every operator otherwise writes by hand: ``owner_reference``
builds one from the owner object, ``set_controller_reference`` makes the owner a child's
controller (refusing, like controller-runtime's ``SetControllerReference``, to take a
child another object already controls), ``set_owner_reference`` adds a plain owner.

An owned child re-triggers its owner (``Controller.owns``) and is garbage-collected with
it. Owner and child must be in the same namespace, or the owner cluster-scoped: the API
server's garbage collector ignores any other reference."""

from __future__ import annotations

from typing import Any

from watchkeeper import meta
from watchkeeper.errors import WatchkeeperError

JSON = dict[str, Any]


class AlreadyOwned(WatchkeeperError):
    """``set_controller_reference``: the child already has a different controller owner
    (``.child``: namespace/name; ``.owner``: the existing controller reference)."""

    def __init__(self, child: str, owner: JSON, wanted: JSON) -> None:
        self.child, self.owner = child, dict(owner)
        super().__init__(
            f"{child} is already controlled by {owner.get('kind')} {owner.get('name')!r} "
            f"(uid {owner.get('uid')}); it cannot also be controlled by "
            f"{wanted.get('kind')} {wanted.get('name')!r}"
        )


def owner_reference(
    owner: JSON, *, controller: bool = False, block_owner_deletion: bool = False,
    api_version: str | None = None, kind: str | None = None,
) -> JSON:
    """The ``ownerReferences`` entry naming ``owner`` (apiVersion, kind, name, uid), as
    read from the server (it must have a uid); ``controller`` and ``block_owner_deletion``
    are set only when true, as kube-apiserver leaves them out otherwise.

    Objects of a LIST of a built-in type carry no apiVersion and kind (kube-apiserver
    leaves them out of list items): pass ``api_version`` and ``kind`` for those."""
    ref: JSON = {}
    for key, value in (("apiVersion", api_version or owner.get("apiVersion")),
                       ("kind", kind or owner.get("kind")),
                       ("name", meta.name(owner)), ("uid", meta.uid(owner))):
        if not value:
            hint = ("pass api_version= and kind= (list items of built-in types have none)"
                    if key in ("apiVersion", "kind") else "pass the owner as read from the server")
            raise ValueError(f"an owner reference needs the owner's {key}, and "
                             f"{meta.ref(owner) or 'the owner'} has none: {hint}")
        ref[key] = value
    if controller:
        ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


def controller_of(child: JSON) -> JSON | None:
    """The child's controller reference (the one with ``controller: true``), if any."""
    for ref in _refs(child):
        if ref.get("controller"):
            return ref
    return None


def set_controller_reference(
    child: JSON, owner: JSON, *, api_version: str | None = None, kind: str | None = None
) -> JSON:
    """Make ``owner`` the controller of ``child`` (``controller`` and
    ``blockOwnerDeletion`` true), in the child's metadata, in place; returns the child.

    An existing reference to the same owner (group, kind, name) is replaced; any other
    owner references stay. Raises ``AlreadyOwned`` if another object controls the child,
    ``ValueError`` if owner and child name different namespaces."""
    ref = owner_reference(owner, controller=True, block_owner_deletion=True,
                          api_version=api_version, kind=kind)
    existing = controller_of(child)
    if existing is not None and not _same_object(existing, ref):
        raise AlreadyOwned(_describe(child), existing, ref)
    return _upsert(child, owner, ref)


def set_owner_reference(
    child: JSON, owner: JSON, *, api_version: str | None = None, kind: str | None = None
) -> JSON:
    """Add ``owner`` as a (non-controller) owner of ``child``, in place; returns the child.
    A reference to the same owner is replaced, keeping its ``controller`` and
    ``blockOwnerDeletion``."""
    ref = owner_reference(owner, api_version=api_version, kind=kind)
    for old in _refs(child):
        if _same_object(old, ref):
            ref.update({k: old[k] for k in ("controller", "blockOwnerDeletion") if k in old})
    return _upsert(child, owner, ref)


def _refs(child: JSON) -> list[JSON]:
    md = child.get("metadata")
    refs = (md.get("ownerReferences") if isinstance(md, dict) else None) or []
    return [r for r in refs if isinstance(r, dict)]


def _group(api_version: object) -> str:
    return str(api_version or "").rpartition("/")[0]


def _same_object(a: JSON, b: JSON) -> bool:
    """As controller-runtime: the same group, kind and name (the version may differ)."""
    return (_group(a.get("apiVersion")) == _group(b.get("apiVersion"))
            and a.get("kind") == b.get("kind") and a.get("name") == b.get("name"))


def _describe(obj: JSON) -> str:
    ns, name = meta.namespace(obj), meta.name(obj) or "(unnamed)"
    return f"{obj.get('kind') or 'object'} {ns}/{name}" if ns else f"{obj.get('kind')} {name}"


def _upsert(child: JSON, owner: JSON, ref: JSON) -> JSON:
    """Replace the reference to the same owner where it stands, or append it. A child
    without a namespace in its metadata (one about to be created through a namespaced
    ``Api``) is not checked: only the server knows where it will live."""
    owner_ns, child_ns = meta.namespace(owner), meta.namespace(child)
    if owner_ns is not None and child_ns is not None and owner_ns != child_ns:
        raise ValueError(f"cross-namespace owner references are not allowed: owner "
                         f"{meta.ref(owner)} is in namespace {owner_ns!r}, the child in "
                         f"{child_ns!r}")
    md = child.get("metadata")
    if not isinstance(md, dict):
        md = child["metadata"] = {}
    refs = _refs(child)
    for i, old in enumerate(refs):
        if _same_object(old, ref):
            refs[i] = ref
            break
    else:
        refs.append(ref)
    md["ownerReferences"] = refs
    return child
