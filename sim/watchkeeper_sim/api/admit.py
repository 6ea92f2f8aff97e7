"""Writes through admission webhooks, in kube-apiserver's order.

A write a webhook's rules may cover is computed three times by the registry, each a dry
run until the last: (1) without validation, the object mutating webhooks are shown
(``Registry.unvalidated``; on create without uid and creationTimestamp, and without a name
yet when the name is to be generated); (2) the admitted object, validated, the object
validating webhooks are shown; (3) the write itself, with the uid and name (2) showed. The
webhooks' changes are stored as they are: the managedFields are those computed before
them, as on a real server (recorded: issue 24 file 001). Where no webhook's rules cover
the request, the write goes straight to the registry.

Differences from a real server: an update whose object changed while its webhooks were
called fails with a 409 (a real server retries the update from the new object); admission
of a deletecollection and of /scale is not done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.registry import Registry, present
from watchkeeper_sim.storage.validation import FieldCheck
from watchkeeper_sim.webhooks.admission import Admission, Refused
from watchkeeper_sim.webhooks.matching import Attributes

#: the webhooks' warnings of the request being served, for its ``Warning`` headers
WARNINGS = web.RequestKey("wk_admission_warnings", list)
#: (dry run, field check) -> the object the write stores (or would)
Write = Callable[[bool, FieldCheck], JSON]
#: (admitted object, dry run) -> stores the admitted object, when the registry writes at the
#: request's version are only dry runs (a CRD conversion webhook stores it at the storage
#: version; a dry run goes through the conversions too, as on a real server)
Commit = Callable[[JSON, bool], Awaitable[JSON]]


def warning_headers(request: web.Request) -> list[str]:
    """The ``Warning`` header values of the webhooks' warnings (``299 - "<text>"``)."""
    return [f"299 - {_status.go_quote(w)}" for w in request.get(WARNINGS) or []]


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def write_options(kind: str, query: Any) -> JSON:
    """CreateOptions/UpdateOptions as the request's query sets them (a patch's too: the API
    server shows a patch as an UPDATE with UpdateOptions, recorded file 005)."""
    out: JSON = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    dry = query.getall("dryRun", [])
    if dry:
        out["dryRun"] = list(dry)
    for key in ("fieldManager", "fieldValidation"):
        if query.get(key):
            out[key] = query[key]
    return out


def delete_options(body: JSON, query: Any) -> JSON:
    """DeleteOptions from the body and the query, in the Go struct's order."""
    out: JSON = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
    grace = query.get("gracePeriodSeconds") or body.get("gracePeriodSeconds")
    if grace is not None:
        out["gracePeriodSeconds"] = int(grace)
    for key in ("preconditions", "orphanDependents"):
        if body.get(key) is not None:
            out[key] = body[key]
    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
    if policy:
        out["propagationPolicy"] = policy
    dry = query.getall("dryRun", []) or body.get("dryRun")
    if dry:
        out["dryRun"] = list(dry)
    return out


def _creation_view(seen: JSON, named: bool, custom: bool) -> JSON:
    """What mutating webhooks see of a new object: no uid, creationTimestamp null (absent
    from a custom resource, unstructured: issue 24 combined, file 001), no generated name
    yet (recorded files 001, 003)."""
    view = clone(seen)
    meta = _meta(view)
    for key in ("uid", "generation"):
        meta.pop(key, None)
    if custom:
        meta.pop("creationTimestamp", None)
    elif "creationTimestamp" in meta:
        meta["creationTimestamp"] = None
    if not named:
        meta.pop("name", None)
    return view


def _before_strategy(seen: JSON, old: JSON) -> JSON:
    """What mutating webhooks see of an update: the object before the strategy's
    PrepareForUpdate, so still the old generation (issue 24 combined, file 004; the
    validating webhooks see it raised)."""
    generation = _meta(old).get("generation")
    if generation is None or _meta(seen).get("generation") == generation:
        return seen
    view = clone(seen)
    _meta(view)["generation"] = generation
    return view


class AdmittedWrites:
    """The registry's writes with the admission webhooks of ``admission`` called."""

    def __init__(self, registry: Registry, admission: Admission | None = None) -> None:
        self.registry = registry
        self.admission = admission
        # the request's user as authentication/v1 UserInfo (the server sets it)
        self.user_info: Callable[[web.Request], JSON] = lambda r: {}

    def wanted(self, rt: ResourceType, operation: str, subresource: str) -> bool:
        return self.admission is not None and self.admission.wanted(rt, operation, subresource)

    def _attributes(self, request: web.Request, operation: str, rt: ResourceType, ns: str,
                    name: str, subresource: str, options: JSON, dry_run: bool) -> Attributes:
        if rt.group == "" and rt.plural == "namespaces":
            ns = name  # the namespace of a namespace is itself
        return Attributes(operation, rt, ns, name, subresource, self.user_info(request),
                          options, dry_run)

    @staticmethod
    def _warnings(request: web.Request) -> list[str]:
        found: list[str] | None = request.get(WARNINGS)
        if found is None:
            found = []
            request[WARNINGS] = found
        return found

    async def create(self, request: web.Request, rt: ResourceType, ns: str, body: Any, *,
                     manager: str, dry_run: bool, check: FieldCheck,
                     original: Write | None = None, commit: Commit | None = None) -> JSON:
        """POST (or an apply that creates: ``original`` is then that write); ``commit``
        stores what the (dry-run) writes admitted, in their place."""
        plain = original is None

        def posted(dry: bool, fc: FieldCheck) -> JSON:
            return self.registry.create(rt, ns, clone(body), manager=manager, dry_run=dry,
                                        check=fc)

        write: Write = posted if original is None else original
        if self.admission is None or not self.wanted(rt, "CREATE", ""):
            if commit is not None:
                preview = write(True, check)
                return await commit(preview, dry_run)
            return write(dry_run, check)
        warnings = self._warnings(request)
        with self.registry.unvalidated():
            seen = write(True, check)
        named = not plain or (isinstance(body, dict) and bool(_meta(body).get("name")))
        view = _creation_view(seen, named, rt.is_custom)
        options = write_options("CreateOptions", request.query)
        attrs = self._attributes(request, "CREATE", rt, ns, str(_meta(view).get("name") or ""),
                                 "", options, dry_run)
        mutated = await self.admission.mutate(attrs, view, None, warnings)
        quiet = FieldCheck(directive="Ignore")  # the body's problems were reported in (1)
        changed = mutated is not None and mutated != view
        if changed:
            validated = self.registry.create(rt, ns, clone(mutated), manager=manager,
                                             dry_run=True, check=quiet, managed=False)
        else:
            validated = write(True, quiet)
        name = str(_meta(validated).get("name") or "")
        uid = str(_meta(validated).get("uid") or "") or None
        attrs = self._attributes(request, "CREATE", rt, ns, name, "", options, dry_run)
        await self.admission.validate(attrs, validated, None, warnings)
        if commit is not None:
            return await commit(validated, dry_run)
        if dry_run:
            return validated
        if changed or plain:  # stored as the validating webhooks saw it: its name and uid
            final = clone(mutated if changed else body)
            meta = final.setdefault("metadata", {}) if isinstance(final, dict) else None
            if isinstance(meta, dict):
                meta["name"] = name
            return self.registry.create(rt, ns, final, manager=manager, check=quiet,
                                        managed=not changed, uid=uid)
        return write(False, quiet)

    async def update(self, request: web.Request, rt: ResourceType, ns: str, name: str,
                     original: Write, *, manager: str, subresource: str, dry_run: bool,
                     check: FieldCheck, commit: Commit | None = None,
                     current: JSON | None = None) -> JSON:
        """PUT or PATCH of an existing object: ``original`` is the write without admission;
        ``commit`` as for ``create``, ``current`` the stored object at the request's version
        (a conversion webhook's view)."""
        if self.admission is None or not self.wanted(rt, "UPDATE", subresource):
            if commit is not None:
                preview = original(True, check)
                return await commit(preview, dry_run)
            return original(dry_run, check)
        warnings = self._warnings(request)
        old = present(current if current is not None else self.registry.store.get(rt, ns, name),
                      rt)
        with self.registry.unvalidated():
            seen = _before_strategy(original(True, check), old)
        attrs = self._attributes(request, "UPDATE", rt, ns, name, subresource,
                                 write_options("UpdateOptions", request.query), dry_run)
        mutated = await self.admission.mutate(attrs, seen, old, warnings)
        quiet = FieldCheck(directive="Ignore")
        admitted = mutated if mutated is not None and mutated != seen else None

        def write(dry: bool, fc: FieldCheck) -> JSON:
            if admitted is None:
                return original(dry, fc)
            return self.registry.update(rt, ns, name, clone(admitted), manager=manager,
                                        subresource=subresource, dry_run=dry, check=fc,
                                        current=current, admitted=True)

        validated = write(True, quiet)
        await self.admission.validate(attrs, validated, old, warnings)
        if commit is not None:
            return await commit(validated, dry_run)
        return validated if dry_run else write(False, quiet)

    async def delete(self, request: web.Request, rt: ResourceType, ns: str, name: str,
                     options: JSON, dry_run: bool, original: Callable[[], JSON],
                     current: JSON | None = None) -> JSON:
        """DELETE: the webhooks see the object as oldObject and no object; a mutating
        webhook's patch is an error (recorded file 030). ``current`` is the stored object
        at the request's version when a conversion webhook made it."""
        stored = self.registry.store.peek(rt, ns, name)
        if self.admission is None or stored is None or not self.wanted(rt, "DELETE", ""):
            return original()
        warnings = self._warnings(request)
        old = present(current if current is not None else stored, rt)
        attrs = self._attributes(request, "DELETE", rt, ns, name, "", options, dry_run)
        await self.admission.mutate(attrs, None, old, warnings)
        await self.admission.validate(attrs, None, old, warnings)
        return original()


__all__ = ["WARNINGS", "AdmittedWrites", "Commit", "Refused", "delete_options", "warning_headers",
           "write_options"]
