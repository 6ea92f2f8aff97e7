"""Write semantics on top of the store: what the apiserver's registry strategies do.

Create/update/patch/delete with validation, uid/timestamps/generation, the status
subresource split (files 142, 143), finalizers and graceful deletion (157-166), dry runs,
managedFields, and the side effects of CRDs (serving new types; on delete the CRD
finalizer: Terminating, instances deleted, the CRD gone once their finalizers are, issue 22
files 001-019), Services (defaults and allocations, services.py) and namespaces
(terminating, then emptied, given the controller's conditions and removed: 168-171). Owner
references are the garbage collector's business (_gc, 172-173).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from watchkeeper.supervisor import start_task
from watchkeeper_sim import status as _status
from watchkeeper_sim.documents import events as _events
from watchkeeper_sim.documents import keyorder as _keyorder
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage import celrules as _celrules
from watchkeeper_sim.storage import configdata as _configdata
from watchkeeper_sim.storage import fields as _fields
from watchkeeper_sim.storage import gotypes as _gotypes
from watchkeeper_sim.storage import metavalid as _metavalid
from watchkeeper_sim.storage import namespaces as _namespaces
from watchkeeper_sim.storage import patch as _patch
from watchkeeper_sim.storage import patchmeta as _patchmeta
from watchkeeper_sim.storage import scale as _scale
from watchkeeper_sim.storage import services as _services
from watchkeeper_sim.storage import strategic as _strategic
from watchkeeper_sim.storage import structural as _structural
from watchkeeper_sim.storage import validation as _validation
from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.resources import CRD_GROUP, CRDError, crd_types
from watchkeeper_sim.storage.store import Matcher, ObjectStore, StoreError, obj_key
from watchkeeper_sim.storage.validation import FieldCheck

FOREGROUND = "foregroundDeletion"  # the finalizers of Foreground and Orphan deletions
ORPHAN = "orphan"


class Collector(Protocol):
    """What the registry tells its garbage collector (``storage.gc``): the collector acts on
    the registry, so the registry knows it only by this protocol and does not import it."""

    def notice(self) -> None: ...

    def notice_removal(self) -> None: ...

    def cancel(self) -> None: ...


_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS_LABEL_PLURALS = {"namespaces", "services"}
# types whose status is a struct the apiserver always encodes: a new one shows "status": {} (135)
_EMPTY_STATUS_ON_CREATE = {("flowcontrol.apiserver.k8s.io", "flowschemas"),
                           ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations")}
# RBAC names are path segments (ValidateRBACName): "system:basic-user" is valid
_PATH_SEGMENT_GROUPS = {"rbac.authorization.k8s.io"}
_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_KEEP_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
              "generation", "name", "namespace")
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
# the CRD finalizer deletes the instances, then polls a minute for them to go before it
# deletes again: an object created meanwhile (an apply may create, file 007) waits for that
CRD_CLEANUP_ROUND = 60.0
_OMITEMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences")


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _spec_part(obj: JSON) -> JSON:
    """Everything generation tracks: the object without metadata, status, kind, apiVersion."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _generation_part(rt: ResourceType, obj: JSON) -> JSON:
    """What a change of bumps metadata.generation: a custom resource without a status
    subresource counts its status too (tests/conformance crd-generation)."""
    if rt.is_custom and not rt.has_status:
        return {k: v for k, v in obj.items() if k not in ("metadata", "kind", "apiVersion")}
    return _spec_part(obj)


def _comparable(obj: JSON) -> JSON:
    out = clone(obj)
    meta = out.get("metadata") or {}
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    return out


def present(obj: JSON, rt: ResourceType) -> JSON:
    """The object as served at ``rt``'s version: kind and apiVersion first (built-ins)."""
    if rt.plural == "events":  # core and events.k8s.io views of one stored set
        obj = _events.serve(rt, obj)
    out: JSON = {"kind": rt.kind, "apiVersion": rt.group_version}
    out.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
    if rt.is_custom:  # unstructured: every key sorted (140-146)
        return _keyorder.sort_object(out)
    return out


class Registry:
    """Kubernetes write semantics over an ObjectStore."""

    def __init__(
        self,
        store: ObjectStore,
        wall_clock: Callable[[], float] = time.time,
        namespace_cleanup_delay: float = 0.05,
        crd_watch_close_delay: float = 1.0,
        crd_cleanup_delay: float = 0.05,
        service_network: _services.Network | None = None,
    ) -> None:
        self.store = store
        self.wall_clock = wall_clock
        self.namespace_cleanup_delay = namespace_cleanup_delay
        self.crd_watch_close_delay = crd_watch_close_delay
        self.crd_cleanup_delay = crd_cleanup_delay
        self.service_network = service_network or _services.Network()
        # What a cluster's controllers do when a namespace appears (ApiServer sets it).
        self.on_namespace_created: Callable[[str], None] | None = None
        # The garbage collector (ApiServer sets it): told when owners may have gone.
        self.gc: Collector | None = None
        # Checks a write must pass before it is stored (ApiServer installs RBAC escalation
        # prevention): (type, namespace, new object, old object or None on create); they
        # raise StoreError to refuse. Dry runs are checked too, as on a real apiserver.
        self.admit: Callable[[ResourceType, str, JSON, JSON | None], None] | None = None
        self._ns_tasks: set[asyncio.Task[None]] = set()
        self._crd_tasks: set[asyncio.Task[None]] = set()
        self._finalizing: set[str] = set()  # CRDs whose finalizer pass is running
        self._unchecked = False  # inside unvalidated(): admission's view of a write

    @contextlib.contextmanager
    def unvalidated(self) -> Iterator[None]:
        """Dry runs in here skip validation and the write checks (``admit``): they give the
        object as mutating admission webhooks see it, before the checks that follow them."""
        self._unchecked = True
        try:
            yield
        finally:
            self._unchecked = False

    def now(self) -> str:
        return iso(self.wall_clock())

    def ns_type(self) -> ResourceType:
        rt = self.store.lookup("", "v1", "namespaces")
        assert rt is not None
        return rt

    # ---- validation ------------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, body: Any, ints: bool = True) -> JSON:
        """The body as decoding into the kind's Go type accepts it (else 400); ``ints=False``
        for an apply, whose integers are converted (wrapping) instead of decoded."""
        if not isinstance(body, dict):
            raise StoreError(_status.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): couldn't "
                "get version/kind; json parse error: expected an object"))
        kind = body.get("kind") or rt.kind
        api_version = body.get("apiVersion") or rt.group_version
        if kind != rt.kind or api_version != rt.group_version:
            version = str(api_version).split("/")[-1]
            internal = rt.group.split(".")[0] if rt.group else "core"
            raise StoreError(_status.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {rt.kind}: converting '
                f"({version}.{kind}) to ({internal}.{rt.kind}): unknown conversion"))
        wrong = _metavalid.type_error(body, rt.kind)
        if wrong is None and ints:
            wrong = _gotypes.decode_error(body, rt)
        if wrong is not None:
            raise StoreError(_status.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {wrong}'))
        return clone(body)

    def _schema(self, rt: ResourceType) -> JSON | None:
        """A custom resource's openAPIV3Schema, read from its CRD (None for built-ins)."""
        if not rt.is_custom:
            return None
        crds = self.store.lookup(CRD_GROUP, "v1", "customresourcedefinitions")
        crd = None if crds is None else self.store.peek(crds, "", f"{rt.plural}.{rt.group}")
        return _validation.crd_schema(crd, rt.version)

    def _decode(self, rt: ResourceType, obj: JSON, check: FieldCheck | None,
                whole_body: bool, defaults: bool = True) -> None:
        """Drop unknown fields (in place) and report them as ``check`` asks (112-115, 148);
        and empty metadata lists and maps, which ObjectMeta's omitempty drops (a patch that
        empties the finalizers of a deleted object answers without them)."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            for key in _OMITEMPTY_META:
                if key in meta and not meta[key]:
                    del meta[key]
        schema = self._schema(rt)
        unknown = _validation.drop_unknown(rt, obj, schema)
        if check is not None:
            check.report(rt, unknown, whole_body)
        if rt.is_custom:
            _validation.whole_numbers(obj)
        if defaults:  # an apply's configuration is not defaulted: its result is (_commit)
            _structural.default(obj, schema)

    def _validate(self, rt: ResourceType, obj: JSON, name: str | None,
                  old: JSON | None = None, subresource: str = "") -> None:
        """422 Invalid with every cause at once, in the apiserver's order (files 090, 091,
        147): the name (on create, ``name`` not None), an update's frozen fields (``old``),
        labels and annotations, owner references (an update repeats them, as many times as
        the kind validates its metadata), data keys, the kind's own checks, then a custom
        resource's schema and its CEL rules."""
        if self._unchecked:
            return
        generate_name = str(_meta(obj).get("generateName") or "")
        causes = [] if name is None else self._name_causes(rt, name, generate_name)
        if old is not None:
            causes += _configdata.update_causes(rt, old, obj)
        causes += _metavalid.metadata_causes(obj)
        causes += _metavalid.owner_reference_causes(
            obj, copies=1 if name is not None else _metavalid.update_copies(rt),
            fresh_pointers=rt.is_custom)
        causes += _metavalid.data_causes(rt, obj) + _metavalid.replicas_causes(rt, obj)
        causes += _configdata.secret_causes(rt, obj)
        if rt.key == ("", "services"):
            causes += _services.causes(obj)
            if old is not None:
                causes += _services.update_causes(obj, old)
        if rt.is_custom and subresource == "status":
            # /status checks the status alone, against its own schema: paths start below it
            schema = self._schema(rt) or {}
            status_schema = (schema.get("properties") or {}).get("status")
            if isinstance(status_schema, dict) and "status" in obj:
                causes += _validation.schema_causes(obj["status"], status_schema)
        elif rt.is_custom:
            causes += _validation.schema_causes(obj, self._schema(rt))
        if rt.scale is not None:  # after the schema's, before the rules (crd-scale-subresource)
            causes += _scale.causes(obj, rt.scale, status_only=subresource == "status")
        if rt.is_custom:  # the rules see the whole object, on /status too
            causes += _celrules.causes(self._schema(rt), obj, old, causes)
        if rt.key == (CRD_GROUP, "customresourcedefinitions") and subresource != "status":
            causes += _celrules.crd_causes(obj)
        if causes:
            if name is None:
                name = str(_meta(obj).get("name") or "")
            raise StoreError(_status.invalid(rt.kind, _invalid_group(rt), name, causes))

    def _name_causes(self, rt: ResourceType, name: str, generate_name: str = "") -> list[JSON]:
        if not name:
            return [_status.cause("FieldValueRequired",
                                  "Required value: name or generateName is required",
                                  "metadata.name")]
        if rt.group in _PATH_SEGMENT_GROUPS and not rt.is_custom:
            bad = next((m for bad, m in ((name in (".", ".."), f"may not be '{name}'"),
                                         ("/" in name, "may not contain '/'"),
                                         ("%" in name, "may not contain '%'")) if bad), None)
            if bad is not None:
                return [_status.cause("FieldValueInvalid", f'Invalid value: "{name}": {bad}',
                                      "metadata.name")]
            return []
        causes = []
        if generate_name:  # validated as a prefix: a trailing dash counts as a letter
            causes = self._dns_causes(rt, generate_name[:-1] + "a" if generate_name.endswith(
                "-") else generate_name, "metadata.generateName", generate_name)
        return causes + self._dns_causes(rt, name, "metadata.name", name)

    def _dns_causes(self, rt: ResourceType, name: str, field: str, shown: str) -> list[JSON]:
        """IsDNS1123Label / IsDNS1123Subdomain: the length, then the pattern, one cause each
        (scenario object-names)."""
        label = rt.plural in _DNS_LABEL_PLURALS
        limit = 63 if label else 253
        errors = [f"must be no more than {limit} characters"] if len(name) > limit else []
        if not (_LABEL if label else _metavalid.SUBDOMAIN).fullmatch(name):
            errors.append(_LABEL_MSG if label else _metavalid.SUBDOMAIN_MSG)
        return [_status.cause("FieldValueInvalid", f'Invalid value: "{shown}": {e}', field)
                for e in errors]

    def _check_namespace(self, rt: ResourceType, namespace: str, obj: JSON, name: str) -> None:
        meta = _meta(obj)
        if not rt.namespaced:
            meta.pop("namespace", None)
            return
        body_ns = meta.get("namespace")
        if body_ns and body_ns != namespace:
            raise StoreError(_status.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"))
        meta["namespace"] = namespace

    def _namespace_usable(self, rt: ResourceType, namespace: str, name: str) -> None:
        if not rt.namespaced:
            return
        ns = self.store.peek(self.ns_type(), "", namespace)
        if ns is None:
            raise StoreError(_status.not_found("namespaces", "", namespace))
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise StoreError(_status.forbidden(
                f'{_status.qualified(rt.plural, rt.group)} "{name}" is forbidden: unable to '
                f"create new content in namespace {namespace} because it is being terminated",
                {"name": name, **({"group": rt.group} if rt.group else {}), "kind": rt.plural,
                 "causes": [{"reason": "NamespaceTerminating",
                             "message": f"namespace {namespace} is being terminated",
                             "field": "metadata.namespace"}]}))

    def _refuse_if_terminating(self, rt: ResourceType) -> None:
        """405 for a create of a custom resource whose CRD is being deleted."""
        if rt.terminating:
            raise StoreError(_status.status(
                405, "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
                {"group": rt.group, "kind": rt.plural}))

    def _allocate(self, rt: ResourceType, obj: JSON) -> None:
        """A Service's cluster IP and node ports (422 when a requested one is not free)."""
        try:
            causes = _services.allocate(obj, self.store.objects(rt), self.service_network)
        except _services.RangeFull as exc:
            raise StoreError(_status.status(
                500, "InternalError", f"Internal error occurred: {exc}",
                {"causes": [{"message": str(exc)}]})) from None
        if causes:
            raise StoreError(_status.invalid(rt.kind, "", _meta(obj).get("name", ""), causes))

    # ---- create ----------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        manager: str,
        dry_run: bool = False,
        managed: bool = True,
        check: FieldCheck | None = None,
        uid: str | None = None,
    ) -> JSON:
        """POST: a new object (201). ``managed=False`` when managedFields are already set;
        ``uid`` the one admission's validating webhooks were shown."""
        obj = self._check_body(rt, body)
        self._decode(rt, obj, check, whole_body=True)
        obj = _events.to_storage(rt, obj)
        if managed:  # an apply that creates is a patch: the handler lets it through (201)
            self._refuse_if_terminating(rt)
        is_service = rt.key == ("", "services")
        if is_service:  # decode-time defaults: owned by the writer
            _services.defaults(obj)
        meta = _meta(obj)
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = str(meta["generateName"]) + "".join(random.choices(_GEN_ALPHABET, k=5))
        self._check_namespace(rt, namespace, obj, name)
        self._namespace_usable(rt, namespace, name)
        obj["kind"], obj["apiVersion"] = rt.kind, rt.group_version
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "selfLink", "uid", "creationTimestamp", "generation"):
            meta.pop(k, None)
        if managed:
            meta.pop("managedFields", None)
        meta["name"] = name
        meta["uid"] = uid or str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        if rt.has_generation:
            meta["generation"] = 1
        if rt.has_status and rt.key != ("", "namespaces"):
            obj.pop("status", None)
        _configdata.prepare(rt, obj)
        if self.admit is not None and not self._unchecked:  # policy-based storage checks
            self.admit(rt, namespace, obj, None)
        self._validate(rt, obj, name)
        is_ns = rt.key == ("", "namespaces")
        if is_ns:  # a default: owned by the creator (file 168)
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj.pop("spec", None)
            obj.pop("status", None)
        new_types: list[ResourceType] = []
        if rt.key == (CRD_GROUP, "customresourcedefinitions"):
            new_types = self._crd_prepare(obj)
        if managed:
            _fields.record_update(None, obj, manager=manager, api_version=rt.group_version,
                                  now=meta["creationTimestamp"], custom=rt.is_custom)
        if new_types:
            self._crd_initial_status(obj)
        if is_ns:  # set by the strategy after field tracking: nobody owns these (file 168)
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        if rt.key in _EMPTY_STATUS_ON_CREATE:
            obj["status"] = {}  # after managedFields: an empty struct is owned by nobody
        if is_service:  # allocated by the service storage: owned by nobody
            self._allocate(rt, obj)
            _services.status_on_create(obj)
        meta["resourceVersion"] = ""  # reserves its place in the key order; set by the store
        obj = _order_meta(obj, rt)
        if dry_run:
            obj["metadata"].pop("resourceVersion")
            return present(obj, rt)
        if self.store.peek(rt, meta.get("namespace", ""), name) is not None:
            raise StoreError(_status.already_exists(rt.plural, rt.group, name))
        stored = self.store.insert(rt, obj)
        if meta.get("ownerReferences"):
            self._gc_notice()
        if new_types:
            self._crd_established(rt, stored, new_types)
        if rt.key == ("", "namespaces") and self.on_namespace_created is not None:
            self.on_namespace_created(name)
        return present(stored, rt)

    # ---- update ----------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        manager: str,
        subresource: str = "",
        dry_run: bool = False,
        check: FieldCheck | None = None,
        current: JSON | None = None,
        admitted: bool = False,
    ) -> JSON:
        """PUT on an object or its /status (no create-on-update: 404 like file 109).
        ``current``: the stored object as seen at ``rt``'s version, when a conversion
        webhook made that view (see ``commit_converted``). ``admitted``: the body is an
        object mutating admission gave back, whose managedFields were computed before the
        webhooks changed it (they are kept, as a real server's)."""
        obj = self._check_body(rt, body)
        self._decode(rt, obj, check, whole_body=True)
        body_name = _meta(obj).get("name")
        if body_name and body_name != name:
            raise StoreError(_status.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL "
                f"({name})"))
        self._check_namespace(rt, namespace, obj, name)
        old = current if current is not None else self.store.get(rt, namespace, name)
        expected = str(_meta(obj).get("resourceVersion") or "")
        if rt.is_custom and not expected:  # no unconditional update (crd-status-subresource)
            raise StoreError(_status.invalid(rt.plural, rt.group, name, [_status.cause(
                "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion")]))
        return self._commit(rt, old, obj, manager=manager, subresource=subresource,
                            expected_rv=expected, dry_run=dry_run, fields_done=admitted)

    def _commit(
        self,
        rt: ResourceType,
        old: JSON,
        new: JSON,
        *,
        manager: str,
        subresource: str,
        expected_rv: str,
        dry_run: bool,
        fields_done: bool = False,
    ) -> JSON:
        """The shared tail of PUT, PATCH and apply: merge rules, checks, store, side effects."""
        old_meta = old["metadata"]
        seen: JSON | None = None
        if subresource == "status":
            if rt.is_custom:  # field tracking resets only spec (142)
                seen = {**_spec_part(old), **{k: v for k, v in new.items()
                                              if k in ("metadata", "status")}}
            merged = clone(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            if fields_done:  # apply computed the ownership of this write: keep it
                _meta(merged)["managedFields"] = clone(
                    _meta(new).get("managedFields") or [])
            new = merged
        else:
            new = _events.to_storage(rt, clone(new))
            new_meta = _meta(new)
            for k in _KEEP_META:
                if k in old_meta:
                    new_meta[k] = old_meta[k]
                else:
                    new_meta.pop(k, None)
            if rt.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if rt.key == ("", "namespaces"):
                new["spec"] = old.get("spec", {})
            if rt.key == ("", "services"):
                _services.defaults(new)
                _services.carry_over(new, old)
            _configdata.prepare(rt, new)
        new["kind"], new["apiVersion"] = rt.kind, rt.group_version
        new_meta = _meta(new)
        if not fields_done:
            new_meta["managedFields"] = clone(old_meta.get("managedFields") or [])
        if old_meta.get("deletionTimestamp"):
            added = [f for f in new_meta.get("finalizers") or []
                     if f not in (old_meta.get("finalizers") or [])]
            if added:
                quoted = ", ".join(f'"{f}"' for f in added)
                msg = ("Forbidden: no new finalizers can be added if the object is being "
                       f"deleted, found new finalizers []string{{{quoted}}}")
                cause = _status.cause("FieldValueForbidden", msg, "metadata.finalizers")
                # kube-apiserver 1.28 lists this cause twice (file 159)
                raise StoreError(_status.invalid(
                    rt.kind, _invalid_group(rt), old_meta["name"], [cause, dict(cause)]))
        if fields_done:
            _structural.default(new, self._schema(rt))
        if rt.has_generation and _generation_part(rt, new) != _generation_part(rt, old):
            new_meta["generation"] = int(old_meta.get("generation") or 0) + 1
        if not fields_done:
            _fields.record_update(old, new, manager=manager, api_version=rt.group_version,
                                  now=self.now(), subresource=subresource, custom=rt.is_custom,
                                  seen=seen)
            if subresource == "scale":  # 1.28.7 maps the Scale's entry back without a time
                for entry in new_meta.get("managedFields") or []:
                    if entry.get("subresource") == "scale":
                        entry.pop("time", None)
        if rt.key == ("", "services") and subresource != "status":
            self._allocate(rt, new)  # a type that now needs an address or node ports
        new_meta["resourceVersion"] = old_meta.get("resourceVersion")
        new = _order_meta(new, rt)
        if self.admit is not None and not self._unchecked:  # on the updated object, before
            # the RV check (409)
            self.admit(rt, obj_key(old)[0], new, old)
        if expected_rv and expected_rv != old_meta.get("resourceVersion"):
            raise StoreError(_status.conflict(rt.plural, rt.group, old_meta["name"],
                                              _status.STALE))
        self._validate(rt, new, None, old, subresource)
        if _comparable(new) == _comparable(old) or dry_run:
            return present(new if dry_run else old, rt)
        ns, name = obj_key(old)
        if old_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            # the last finalizer went: the object is gone; watchers see DELETED (old object)
            self.store.remove(rt, ns, name, last=old)
            self._after_removal(rt, old)
            return present(new, rt)
        stored = self.store.replace(rt, new, expected_rv)
        if new_meta.get("ownerReferences") != old_meta.get("ownerReferences"):
            self._gc_notice()
        if rt.key == (CRD_GROUP, "customresourcedefinitions"):
            self._crd_sync(stored)
        return present(stored, rt)

    # ---- patch -----------------------------------------------------------------------------

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        manager: str,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        check: FieldCheck | None = None,
        current: JSON | None = None,
    ) -> tuple[JSON, int]:
        """PATCH of any supported type; returns (object, HTTP status: 200, or 201 for apply).
        ``current`` as for ``update``."""
        if patch_type == "apply":
            return self._apply(rt, namespace, name, body, manager=manager,
                               subresource=subresource, force=force, dry_run=dry_run,
                               check=check, current=current)
        shape = {"merge": (dict, "map[string]interface {}"),
                 "json": (list, "[]handlers.jsonPatchOp")}.get(patch_type)
        if shape is not None and body is not None and not isinstance(body, shape[0]):
            raise StoreError(_status.bad_request(  # patch-errors, json-patch
                f"error decoding patch: json: cannot unmarshal {_metavalid.json_type(body)} "
                f"into Go value of type {shape[1]}"))
        old = current if current is not None else self.store.get(rt, namespace, name)
        view = _events.view_of(rt, old)  # a patch is written against the served form
        try:
            if patch_type == "json":
                new = _patch.json_patch(view, body)
            elif patch_type == "strategic":
                new = _strategic.strategic_merge(view, body, _patchmeta.meta_of(rt))
            else:
                new = _patch.merge_patch(view, body)
        except _patch.PatchError:
            raise StoreError(_status.status(
                422, "Invalid", "the server rejected our request due to an error in our request",
                {})) from None
        except _strategic.StrategicError as exc:  # the apiserver's unmapped error: a bare 500
            code = exc.code
            raise StoreError(_status.status(
                code, {400: "BadRequest", 422: None}.get(code), str(exc))) from None
        if not isinstance(new, dict):
            raise StoreError(_status.bad_request("the patch did not produce an object"))
        wrong = _metavalid.type_error(new, rt.kind)
        if wrong is None and patch_type == "strategic":
            try:  # through the unstructured converter: integers wrap around
                _gotypes.convert(new, rt)
            except ValueError as exc:
                raise _patch_invalid(json.dumps(_gotypes.go_value(body), ensure_ascii=False),
                                     str(exc)) from None
        elif wrong is None:
            wrong = _gotypes.decode_error(new, rt)
        if wrong is not None:  # the patched object does not decode: 422 on "patch"
            if patch_type == "merge":  # json-patch's document: its top-level keys sorted
                new = dict(sorted(new.items()))
            patched = json.dumps(json.dumps(new, separators=(",", ":"), ensure_ascii=False),
                                 ensure_ascii=False)
            raise _patch_invalid(patched, wrong)
        self._check_patched(rt, namespace, name, new)
        new = clone(new)
        self._decode(rt, new, check, whole_body=False)
        expected = str(_meta(new).get("resourceVersion") or "")
        return self._commit(rt, old, new, manager=manager, subresource=subresource,
                            expected_rv=expected, dry_run=dry_run), 200

    def commit_converted(self, rt: ResourceType, old: JSON | None, new: JSON) -> JSON:
        """Store what a dry run at a version other than the storage version computed, once
        the conversion webhook turned it into the storage version (``rt``): the write's
        checks ran in the dry run; here only what a write does to the store."""
        new = clone(new)
        meta = _meta(new)
        if old is None:
            meta["resourceVersion"] = ""
            stored = self.store.insert(rt, _order_meta(new, rt))
            if meta.get("ownerReferences"):
                self._gc_notice()
            return stored
        old_meta = old["metadata"]
        if _comparable(new) == _comparable(old):
            return old
        ns, name = obj_key(old)
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.store.remove(rt, ns, name, last=old)
            self._after_removal(rt, old)
            return new
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        stored = self.store.replace(rt, new, str(old_meta.get("resourceVersion") or ""))
        if meta.get("ownerReferences") != old_meta.get("ownerReferences"):
            self._gc_notice()
        return stored

    # ---- a custom resource's /scale ------------------------------------------------------

    def get_scale(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        """GET .../scale: the object's replicas as an autoscaling/v1 Scale."""
        assert rt.scale is not None
        return _scale.scale_of(self.store.get(rt, namespace, name), rt.scale)

    def write_scale(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        manager: str,
        dry_run: bool = False,
    ) -> JSON:
        """PUT (``patch_type`` "") or PATCH of .../scale: the Scale's spec replicas go into the
        object, which is then updated as the object itself is; the answer is its new Scale."""
        assert rt.scale is not None
        old = self.store.get(rt, namespace, name)
        current = _scale.scale_of(old, rt.scale)
        wanted = body
        try:
            if patch_type == "json":
                wanted = _patch.json_patch(current, body)
            elif patch_type == "merge":
                wanted = _patch.merge_patch(current, body)
        except _patch.PatchError:
            raise StoreError(_status.status(
                422, "Invalid", "the server rejected our request due to an error in our request",
                {})) from None
        new, expected = _scale.scaled(old, wanted, rt.scale)
        stored = self._commit(rt, old, new, manager=manager, subresource="scale",
                              expected_rv=expected, dry_run=dry_run)
        return _scale.scale_of(stored, rt.scale)

    def _check_patched(self, rt: ResourceType, namespace: str, name: str, new: JSON) -> None:
        meta = _meta(new)
        if meta.get("name") != name:
            raise StoreError(_status.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"))
        if rt.namespaced and meta.get("namespace") not in (None, namespace):
            raise StoreError(_status.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"))

    def _apply(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        config: Any,
        *,
        manager: str,
        subresource: str,
        force: bool,
        dry_run: bool,
        check: FieldCheck | None = None,
        current: JSON | None = None,
    ) -> tuple[JSON, int]:
        if isinstance(config, dict):  # an apply names its type itself (ssa-invalid)
            kind, api_version = str(config.get("kind") or ""), str(config.get("apiVersion") or "")
            if kind != rt.kind or api_version != rt.group_version:
                group, _, version = api_version.rpartition("/")
                raise StoreError(_status.bad_request(
                    f"invalid object type: {group}/{version}, Kind={kind}"))
            meta = config.get("metadata")
            if isinstance(meta, dict) and meta.get("managedFields"):
                raise StoreError(_status.bad_request("metadata.managedFields must be nil"))
        config = self._check_body(rt, config, ints=False)
        self._decode(rt, config, check, whole_body=False, defaults=False)
        cmeta = _meta(config)
        if cmeta.get("name") and cmeta["name"] != name:
            raise StoreError(_status.bad_request(
                f"the name of the object ({cmeta['name']}) does not match the name on the URL "
                f"({name})"))
        config_ns = str(cmeta.get("namespace") or "")
        self._check_namespace(rt, namespace, config, name)
        cmeta.pop("managedFields", None)
        if current is None:
            current = self.store.peek(rt, namespace, name)
        now = self.now()
        try:
            result = _fields.apply(
                _events.view_of(rt, clone(current)) if current else None, config,
                manager=manager,
                force=force, api_version=rt.group_version, now=now, subresource=subresource,
                custom=rt.is_custom)
        except _fields.ApplyConflict as exc:
            raise StoreError(_status.status(409, "Conflict", exc.message,
                                            {"causes": exc.causes()})) from None
        try:  # the typed conversion of the result: integers wrap around, as in a SMP
            _gotypes.convert(result, rt)
        except ValueError as exc:  # a bare 500 (file 079); the namespace as the config had it
            kind = f"{rt.group_version}, Kind={rt.kind}"
            raise StoreError(_status.status(
                500, None, f"failed to convert new object ({config_ns}/{name}; {kind}) to "
                f"proper version: unable to convert unstructured object to {kind}: {exc}",
            )) from None
        if current is None:
            _meta(result)["name"] = name
            return self.create(rt, namespace, result, manager=manager, dry_run=dry_run,
                               managed=False), 201
        expected = str(cmeta.get("resourceVersion") or "")
        _meta(result)["resourceVersion"] = current["metadata"].get("resourceVersion")
        return self._commit(rt, clone(current), result, manager=manager,
                            subresource=subresource, expected_rv=expected, dry_run=dry_run,
                            fields_done=True), 200

    # ---- delete ----------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str = "",
        resource_version: str = "",
        propagation: str = "",
        dry_run: bool = False,
    ) -> JSON:
        """DELETE: Status Success, or the object when it lingers (finalizers, propagation)."""
        old = self.store.get(rt, namespace, name)
        meta = old["metadata"]
        if uid and uid != meta.get("uid"):
            raise StoreError(_status.precondition_conflict(
                rt.kind, rt.group, name,
                f"the UID in the precondition ({uid}) does not match the UID in record "
                f"({meta.get('uid')}). The object might have been deleted and then recreated"))
        if resource_version and resource_version != meta.get("resourceVersion"):
            raise StoreError(_status.precondition_conflict(
                rt.kind, rt.group, name,
                f"the ResourceVersion in the precondition ({resource_version}) does not match "
                f"the ResourceVersion in record ({meta.get('resourceVersion')}). The object "
                "might have been modified"))
        if meta.get("deletionTimestamp"):
            return present(old, rt)
        finalizers = list(meta.get("finalizers") or [])
        extra = {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(propagation)
        if extra and extra not in finalizers:
            finalizers.append(extra)
        is_ns = rt.key == ("", "namespaces")
        is_crd = rt.key == (CRD_GROUP, "customresourcedefinitions")
        if not finalizers and not is_ns and not is_crd:
            if not dry_run:
                self.store.remove(rt, namespace, name)
                self._after_removal(rt, old)
            return _status.success(name, rt.group, rt.plural, str(meta.get("uid")))
        new = clone(old)
        nmeta = new["metadata"]
        nmeta["deletionTimestamp"] = self.now()
        if nmeta.get("generation") and not is_crd:
            # markAsDeleting: an object its finalizers keep is a new generation (conformance
            # crd-generation); a CRD's own deletion does not bump it (file 154)
            nmeta["generation"] = int(nmeta["generation"]) + 1
        if is_crd:
            finalizers.append(CRD_FINALIZER)
            status = new.setdefault("status", {})
            status["conditions"] = [*(status.get("conditions") or []), {
                "type": "Terminating", "status": "True", "lastTransitionTime": self.now(),
                "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; CustomResource "
                           "deletion will begin soon"}]
        elif not is_ns:
            nmeta["deletionGracePeriodSeconds"] = 0
        if finalizers:
            nmeta["finalizers"] = finalizers
        if is_ns:
            new["status"] = {"phase": "Terminating"}
        new = _order_meta(new, rt)
        if dry_run:
            return present(new, rt)
        stored = self.store.replace(rt, new)
        if is_crd:
            self._crd_delete(stored)
        elif is_ns:
            self._schedule_namespace_cleanup(name)
        if extra:
            self._gc_notice()
        return present(stored, rt)

    def delete_collection(
        self, rt: ResourceType, namespace: str | None, match: Matcher, *, dry_run: bool = False
    ) -> list[JSON]:
        """DELETE on a collection: deletes every match; returns them as they were."""
        gone = []
        for obj in self.store.objects(rt, namespace):
            if not match(obj):
                continue
            ns, name = obj_key(obj)
            try:
                self.delete(rt, ns, name, dry_run=dry_run)
            except StoreError:
                continue
            gone.append(obj)
        return gone

    def _gc_notice(self) -> None:
        if self.gc is not None:
            self.gc.notice()

    def _after_removal(self, rt: ResourceType, old: JSON) -> None:
        if self.gc is not None:
            self.gc.notice_removal()
        if rt.key == ("", "namespaces"):
            return
        crd_name = f"{rt.plural}.{rt.group}"
        if rt.terminating and crd_name not in self._finalizing:
            self._crd_finalize(crd_name, delete=False)  # the last one may have gone
        if rt.key == (CRD_GROUP, "customresourcedefinitions"):
            spec = old.get("spec") or {}
            key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            self.store.end_watches(key)
            self.store.unregister(*key)

    # ---- CRDs ------------------------------------------------------------------------------

    def _crd_prepare(self, obj: JSON) -> list[ResourceType]:
        try:
            types = crd_types(obj)
        except CRDError as exc:
            raise StoreError(_status.invalid(
                "CustomResourceDefinition", CRD_GROUP, _meta(obj).get("name", ""),
                [_status.cause(r, m, f) for r, f, m in exc.causes])) from None
        spec = obj["spec"]
        names = spec["names"]
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        spec.setdefault("conversion", {"strategy": "None"})
        return types

    @staticmethod
    def _crd_initial_status(obj: JSON) -> None:
        """Set by the strategy after field tracking: nobody owns the initial status (136)."""
        spec = obj["spec"]
        obj["status"] = {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")]
            or [spec["versions"][0]["name"]],
        }

    def _crd_established(self, rt: ResourceType, stored: JSON, types: list[ResourceType]) -> None:
        """Serve the new types and mark the CRD Established, like the apiextensions controllers."""
        for t in types:
            self.store.register(t)
        new = clone(stored)
        now = self.now()
        names = dict(new["spec"]["names"])
        new["status"]["acceptedNames"] = names
        new["status"]["conditions"] = [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ]
        _fields.record_update(stored, new, manager="kube-apiserver", api_version=rt.group_version,
                              now=now, subresource="status")
        self.store.replace(rt, new)

    def _crd_sync(self, crd: JSON) -> None:
        """After a CRD update: serve exactly its served versions."""
        try:
            types = crd_types(crd)
        except CRDError:
            return
        if not types:
            return
        group, plural = types[0].group, types[0].plural
        served = {t.version for t in types}
        for (g, v, p) in list(self.store.types):
            if (g, p) == (group, plural) and v not in served:
                del self.store.types[(g, v, p)]
        terminating = bool(crd["metadata"].get("deletionTimestamp"))
        for t in types:
            self.store.register(dataclasses.replace(t, terminating=terminating))

    def _crd_delete(self, crd: JSON) -> None:
        """Start the CRD finalizer (apiextensions' crd_finalizer): stop creates, delete every
        custom resource, and remove the CRD once they are all gone; custom resources with
        finalizers keep it Terminating (and their resource served) until theirs go."""
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        for t in [t for (g, _, p), t in self.store.types.items() if (g, p) == key]:
            self.store.register(dataclasses.replace(t, terminating=True))
        name = crd["metadata"]["name"]
        if self._crd_finalize(name, delete=True):
            return
        try:
            asyncio.get_running_loop()  # is there a loop to wait in?
        except RuntimeError:
            return  # without one, the next write or removal of a custom resource finishes it
        task = start_task(self._crd_worker(name), name=f"simulator: CRD {name}")
        self._crd_tasks.add(task)
        task.add_done_callback(self._crd_tasks.discard)

    async def _crd_worker(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        round_started = loop.time()
        while True:
            await asyncio.sleep(self.crd_cleanup_delay)  # the real one polls every 5 s
            again = loop.time() - round_started >= CRD_CLEANUP_ROUND
            if again:
                round_started = loop.time()
            if self._crd_finalize(name, delete=again):
                return

    def _crd_finalize(self, name: str, delete: bool) -> bool:
        """One pass of the CRD finalizer (deleting the instances, or only looking whether
        they are gone); True when the CRD is gone."""
        self._finalizing.add(name)
        try:
            return self._crd_finalize_pass(name, delete)
        finally:
            self._finalizing.discard(name)

    def _crd_finalize_pass(self, name: str, delete: bool) -> bool:
        crd_rt = self.store.lookup(CRD_GROUP, "v1", "customresourcedefinitions")
        crd = None if crd_rt is None else self.store.peek(crd_rt, "", name)
        if crd_rt is None or crd is None:
            return True
        spec = crd.get("spec") or {}
        group = spec.get("group", "")
        plural = (spec.get("names") or {}).get("plural", "")
        if _condition_reason(crd, "Terminating") == "InstanceDeletionPending":
            crd = self._crd_terminating_status(crd_rt, crd)
        types = [t for (g, _, p), t in self.store.types.items() if (g, p) == (group, plural)]
        if types:
            for obj in self.store.objects(types[0]) if delete else ():
                if not obj["metadata"].get("deletionTimestamp"):
                    ns, oname = obj_key(obj)
                    with contextlib.suppress(StoreError):
                        self.delete(types[0], ns, oname)
            if self.store.objects(types[0]):
                return False
        others = [f for f in crd["metadata"].get("finalizers") or [] if f != CRD_FINALIZER]
        if others:  # someone else's finalizer: only ours goes, with the final condition
            self._crd_terminating_status(crd_rt, crd, done=True, finalizers=others)
            return True
        # every instance is gone: the finalizer goes, and with it the CRD (DELETED shows it
        # as last stored, still InstanceDeletionInProgress); watches end ~1 s later (154)
        self.store.remove(crd_rt, "", name)
        self.store.end_watches((group, plural), delay=self.crd_watch_close_delay)
        self.store.unregister(group, plural)
        self._gc_notice()  # dependents of the custom resources
        return True

    def _crd_terminating_status(self, crd_rt: ResourceType, crd: JSON, done: bool = False,
                                finalizers: list[str] | None = None) -> JSON:
        """The finalizer's status writes: Terminating InstanceDeletionInProgress first; at the
        end InstanceDeletionCompleted, its finalizer removed (seen only when another one
        keeps the CRD)."""
        new = clone(crd)
        now = self.now()
        conditions = [c for c in new["status"].get("conditions") or []
                      if c.get("type") != "Terminating"]
        conditions.append(
            {"type": "Terminating", "status": "False", "lastTransitionTime": now,
             "reason": "InstanceDeletionCompleted", "message": "removed all instances"} if done
            else {"type": "Terminating", "status": "True", "lastTransitionTime": now,
                  "reason": "InstanceDeletionInProgress",
                  "message": "CustomResource deletion is in progress"})
        new["status"]["conditions"] = conditions
        if finalizers is not None:
            new["metadata"]["finalizers"] = finalizers
        _fields.record_update(crd, new, manager="kube-apiserver", api_version=crd_rt.group_version,
                              now=now, subresource="status")
        return self.store.replace(crd_rt, _order_meta(new, crd_rt))

    # ---- namespaces ------------------------------------------------------------------------

    def _schedule_namespace_cleanup(self, name: str) -> None:
        try:
            asyncio.get_running_loop()  # is there a loop to run it in?
        except RuntimeError:
            self._cleanup_namespace(name)
            return
        task = start_task(self._namespace_worker(name), name=f"simulator: namespace {name}")
        self._ns_tasks.add(task)
        task.add_done_callback(self._ns_tasks.discard)

    async def _namespace_worker(self, name: str) -> None:
        while True:
            await asyncio.sleep(self.namespace_cleanup_delay)
            if self._cleanup_namespace(name):
                return

    def _cleanup_namespace(self, name: str) -> bool:
        """Delete the namespace's content; remove it once empty. True when done."""
        ns = self.store.peek(self.ns_type(), "", name)
        if ns is None:
            return True
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for rt in {t.key: t for t in self.store.types.values() if t.namespaced}.values():
            for obj in self.store.objects(rt, name):
                oname = obj["metadata"]["name"]
                if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                    with contextlib.suppress(StoreError):
                        self.delete(rt, name, oname)
                left = self.store.peek(rt, name, oname)
                if left is None:
                    continue
                res = f"{rt.plural}.{rt.group}"
                remaining[res] = remaining.get(res, 0) + 1
                for f in (left.get("metadata") or {}).get("finalizers") or []:
                    finalizers[f] = finalizers.get(f, 0) + 1
        ns = self.store.peek(self.ns_type(), "", name)
        if ns is None:
            return True
        previous = (ns.get("status") or {}).get("conditions")
        now = self.now()
        conditions = _namespaces.deletion_conditions(now, remaining, finalizers, previous)
        if not _namespaces.same_conditions(previous, conditions):
            # the controller's status write comes first (file 171: MODIFIED, then DELETED)
            self.store.replace(self.ns_type(), _namespaces.with_conditions(ns, conditions, now))
        if remaining:
            return False
        self.store.remove(self.ns_type(), "", name)
        if self.gc is not None:
            self.gc.notice_removal()
        return True

    def cancel_background(self) -> None:
        for task in [*self._ns_tasks, *self._crd_tasks]:
            task.cancel()
        if self.gc is not None:
            self.gc.cancel()


def _invalid_group(rt: ResourceType) -> str:
    """The group a 422 names: the kind's own ("Deployment.apps", file 030), but core's for
    events.k8s.io Events, which are validated as core Events ("Event", issue 22)."""
    return "" if rt.plural == "events" else rt.group


def _condition_reason(obj: JSON, kind: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return str(c.get("reason") or "")
    return ""


def _patch_invalid(value: str, why: str) -> StoreError:
    """422 on the "patch" field: ``value`` (already quoted) did not decode."""
    cause = _status.cause("FieldValueInvalid", f"Invalid value: {value}: {why}", "patch")
    return StoreError(_status.status(422, "Invalid", f' "" is invalid: patch: {cause["message"]}',
                                     {"causes": [cause]}))


def _order_meta(obj: JSON, rt: ResourceType) -> JSON:
    """Metadata keys in the apiserver's order, so dumps read like the real thing; a built-in
    kind's empty owner references or finalizers are left out (omitempty), as after a
    strategic merge patch deleted the last one (file 036)."""
    meta = obj.get("metadata") or {}
    if not rt.is_custom:
        _keyorder.canonical(obj, rt.group, rt.plural)
        for key in ("ownerReferences", "finalizers"):
            if meta.get(key) == []:
                del meta[key]
    ordered = {k: meta[k] for k in _keyorder.META_ORDER if k in meta}
    ordered.update((k, v) for k, v in meta.items() if k not in ordered)
    obj["metadata"] = ordered
    return obj
