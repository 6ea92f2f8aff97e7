"""Calling admission webhooks as kube-apiserver 1.28's dispatchers do.

Mutating webhooks one after another (configurations by name), each JSON patch applied
before the next call; a webhook with ``reinvocationPolicy: IfNeeded`` is called once more
when a later one changed the object. Validating webhooks are all called at once, as on a
real server; the first refusal in their order is the answer (a real server takes the
first to arrive). A webhook whose rules cover another version of the resource
(matchPolicy Equivalent, the default) is shown the request at that version: object and
oldObject converted to it (a CRD's conversion webhook), a mutating webhook's patch applied
there and the result converted back, as kube-apiserver's ``ConvertToGVK`` does. A
refusal is :class:`Refused` with the Status the API server answers; the webhooks' warnings
are collected for the ``Warning`` headers, also of a refused request. ``matchConditions``
(beta in 1.28) are not evaluated.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage.patch import PatchError, json_patch
from watchkeeper_sim.webhooks import review
from watchkeeper_sim.webhooks.call import WebhookCaller, WebhookCallError, json_type
from watchkeeper_sim.webhooks.matching import (
    Attributes,
    Hook,
    NamespaceLabels,
    equivalent,
    exempt,
    hooks_of,
    namespace_selected,
    object_selected,
)

#: (mutating?) -> the stored webhook configurations of that kind
Configurations = Callable[[bool], "list[JSON]"]
#: the other served versions of a resource (matchPolicy Equivalent), most preferred first
Versions = Callable[[ResourceType], "list[ResourceType]"]
#: an object converted to another version of its resource (a CRD's conversion webhook)
Convert = Callable[[JSON, ResourceType], Awaitable[JSON]]


class Refused(Exception):
    """The request is refused by admission; ``status`` is the API server's answer."""

    def __init__(self, status: JSON) -> None:
        super().__init__(status.get("message"))
        self.status = status


def _internal(message: str) -> JSON:
    return _status.status(500, "InternalError", f"Internal error occurred: {message}",
                          {"causes": [{"message": message}]})


def denial(hook: Hook, result: Any) -> JSON:
    """``webhookerrors.ToStatusErr``: the webhook's status, at least a 400, its message
    prefixed with the webhook's name (its reason when it gave no message)."""
    result = dict(result) if isinstance(result, dict) else {}
    code = result.get("code") if isinstance(result.get("code"), int) else 0
    denied = f'admission webhook "{hook.name}" denied the request'
    if result.get("message"):
        message = f"{denied}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied}: {result['reason']}"
    else:
        message = f"{denied} without explanation"
    out = _status.status(max(code, 400), result.get("reason") or None, message,
                         result.get("details") if isinstance(result.get("details"), dict)
                         else None)
    return out


def _apply(obj: JSON, ops: list[Any]) -> Any:
    """The webhook's JSON patch, its failure in the words of the API server's json-patch
    library (evanphx/json-patch, recorded file 031) where the simulator knows them."""
    for op in ops:
        try:
            obj = json_patch(obj, [op])
        except PatchError as exc:
            kind = op.get("op") if isinstance(op, dict) else None
            path = op.get("path") if isinstance(op, dict) else None
            if kind in ("add", "remove") and isinstance(path, str):
                raise Refused(_internal(f'{kind} operation does not apply: doc is missing '
                                        f'path: "{path}": missing value')) from None
            if kind == "replace" and isinstance(path, str):
                raise Refused(_internal("replace operation does not apply: doc is missing "
                                        f"key: {path}: missing value")) from None
            raise Refused(_internal(str(exc))) from None
    return obj


class Admission:
    """The admission webhooks of one simulator: which a request reaches, and the calls."""

    def __init__(self, configurations: Configurations, namespace_labels: NamespaceLabels,
                 caller: WebhookCaller) -> None:
        self._configurations = configurations
        self._namespace_labels = namespace_labels
        self.caller = caller
        # set by the server where resources have several versions (custom resources)
        self.versions: Versions = lambda rt: []
        self.convert: Convert | None = None

    def wanted(self, rt: ResourceType, operation: str, subresource: str) -> bool:
        """Whether any webhook's rules could cover such a request (selectors aside): if none
        does, the write goes on as without admission."""
        if exempt(rt):
            return False
        probe = Attributes(operation, rt, "", "", subresource, {}, {}, False)
        others = self.versions(rt)
        return any(equivalent(hook, probe, others) is not None for mutating in (True, False)
                   for hook in hooks_of(self._configurations(mutating), mutating))

    def _called(self, hook: Hook, attrs: Attributes, obj: JSON | None,
                old: JSON | None) -> Attributes | None:
        """The request as this webhook sees it (its version), None when it is not called."""
        seen = equivalent(hook, attrs, self.versions(attrs.rt))
        if seen is None:
            return None
        selected = namespace_selected(hook, attrs, obj, self._namespace_labels)
        if selected is None:
            raise Refused(_status.not_found("namespaces", "", attrs.namespace))
        return seen if selected and object_selected(hook, obj, old) else None

    async def _at(self, rt: ResourceType, obj: JSON | None) -> JSON | None:
        """``obj`` at ``rt``'s version (unchanged when it is there already)."""
        if obj is None or obj.get("apiVersion") == rt.group_version:
            return obj
        if self.convert is None:
            return {**obj, "apiVersion": rt.group_version}
        return await self.convert(obj, rt)

    async def _call(self, hook: Hook, attrs: Attributes, obj: JSON | None, old: JSON | None,
                    warnings: list[str]) -> tuple[JSON, bytes] | None:
        """The webhook's (response, patch); None when it failed open. Raises Refused."""
        if attrs.dry_run and hook.side_effects_on_dry_run:
            raise Refused(_status.bad_request(
                f'admission webhook "{hook.name}" does not support dry run'))
        uid, body = review.request(attrs, obj, old)
        try:
            try:
                answer = await self.caller.post(hook.spec.get("clientConfig") or {}, body,
                                                hook.timeout)
                response, patch = review.verify(uid, hook.mutating, answer)
            except review.BadAnswer as exc:
                if exc.decoding:
                    raise WebhookCallError(str(exc)) from None
                raise
        except WebhookCallError as exc:
            reason = f"failed to call webhook: {exc}"
        except review.BadAnswer as exc:
            reason = f"received invalid webhook response: {exc}"
        else:
            warnings.extend(str(w) for w in response.get("warnings") or [])
            if response.get("allowed") is not True:
                raise Refused(denial(hook, response.get("status")))
            return response, patch
        if hook.fails_open:
            return None
        raise Refused(_internal(f'failed calling webhook "{hook.name}": {reason}'))

    async def mutate(self, attrs: Attributes, obj: JSON | None, old: JSON | None,
                     warnings: list[str]) -> JSON | None:
        """The object after every mutating webhook the request reaches (``obj`` itself when
        none changed it)."""
        hooks = [(h, seen) for h in hooks_of(self._configurations(True), True)
                 if (seen := self._called(h, attrs, obj, old)) is not None]
        previously: set[int] = set()  # reinvocable webhooks called before a change
        reinvoke: set[int] = set()
        changed_any = False
        for index, (hook, seen) in enumerate(hooks):
            obj, changed = await self._mutate_one(hook, seen, obj, old, warnings)
            if changed:
                reinvoke |= previously
                previously = set()
                changed_any = True
            if hook.reinvoked_if_needed:
                previously.add(index)
        if changed_any:
            for index, (hook, seen) in enumerate(hooks):
                if index in reinvoke:
                    obj, _ = await self._mutate_one(hook, seen, obj, old, warnings)
        return obj

    async def _mutate_one(self, hook: Hook, seen: Attributes, obj: JSON | None,
                          old: JSON | None, warnings: list[str]) -> tuple[JSON | None, bool]:
        """One call; ``seen`` the request at the webhook's version, the patch applied there
        and the result converted back to the request's."""
        shown = await self._at(seen.rt, obj)
        called = await self._call(hook, seen, shown, await self._at(seen.rt, old), warnings)
        if called is None or not called[1]:
            return obj, False
        try:
            ops = json.loads(called[1])
        except ValueError as exc:
            raise Refused(_internal(str(exc))) from None
        if not isinstance(ops, list):  # decoded before its patchType is read (file 037)
            raise Refused(_internal(f"json: cannot unmarshal {json_type(ops)} into Go value "
                                    "of type jsonpatch.Patch"))
        if not ops:
            return obj, False
        if obj is None or shown is None:
            raise Refused(_internal(
                f'admission webhook "{hook.name}" attempted to modify the object, which is '
                "not supported for this operation"))
        if called[0].get("patchType") != "JSONPatch":
            if hook.fails_open:
                return obj, False
            raise Refused(_internal(
                f'failed calling webhook "{hook.name}": unsupported patch type '
                f'"{called[0].get("patchType")}"'))
        patched = _apply(shown, ops)
        if not isinstance(patched, dict):
            raise Refused(_internal("the patched object is not an object"))
        if seen.request_rt is not None:
            back = await self._at(seen.request_rt, patched)
            assert back is not None
            patched = back
        return patched, patched != obj

    async def validate(self, attrs: Attributes, obj: JSON | None, old: JSON | None,
                       warnings: list[str]) -> None:
        """Every validating webhook the request reaches, all at once as the dispatcher calls
        them (the request waits for the last); the first refusal in their order is raised,
        their warnings are kept in that order."""
        hooks = [(h, seen) for h in hooks_of(self._configurations(False), False)
                 if (seen := self._called(h, attrs, obj, old)) is not None]
        views: dict[str, tuple[JSON | None, JSON | None]] = {}  # one conversion per version
        for _, seen in hooks:
            if seen.rt.group_version not in views:
                views[seen.rt.group_version] = (await self._at(seen.rt, obj),
                                                await self._at(seen.rt, old))

        async def one(hook: Hook, seen: Attributes, said: list[str]) -> Refused | None:
            try:
                await self._call(hook, seen, *views[seen.rt.group_version], said)
            except Refused as exc:
                return exc
            return None

        said: list[list[str]] = [[] for _ in hooks]
        outcomes = await asyncio.gather(*(one(h, seen, w) for (h, seen), w
                                          in zip(hooks, said, strict=True)))
        for lines in said:
            warnings.extend(lines)
        refused = [r for r in outcomes if r is not None]
        if refused:
            raise refused[0]
