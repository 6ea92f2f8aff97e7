"""What a user sees on the object of a reconcile's outcome (``kubectl describe``): a Warning
Event for each failure, through a ``Recorder`` (which counts a repeat in one Event's series),
and, if asked, the ``Ready`` condition in its status.

Both are opt-in: a ``Recorder`` given to the ``Controller`` (client-go's recorder is explicit
too, and Events need RBAC the operator may not have), ``ControllerConfig.ready_condition``
(only a resource with a status subresource has somewhere to keep it)."""

from __future__ import annotations

import logging
from typing import Any

from watchkeeper import meta
from watchkeeper.client import Api, ApiError, Conflict, NotFound
from watchkeeper.controller.action import ObjectRef
from watchkeeper.controller.errors import PermanentError
from watchkeeper.controller.recorder import Recorder
from watchkeeper.typed.conditions import set_condition

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]

READY = "Ready"
RECONCILED = "Reconciled"
FAILED = "ReconcileFailed"
FAILED_PERMANENTLY = "ReconcileFailedPermanently"


def failure_reason(exc: BaseException) -> str:
    return FAILED_PERMANENTLY if isinstance(exc, PermanentError) else FAILED


def failure_note(exc: BaseException) -> str:
    """The error, the same text each time it repeats: no retry delay or attempt number in
    it, or the Recorder could not count repeats in one Event."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Reporter:
    """Records each reconcile's outcome on its object; never raises (a courtesy to the
    user, not part of the reconcile's result)."""

    def __init__(self, api: Api, recorder: Recorder | None, ready_condition: bool) -> None:
        self.api, self.recorder, self.ready_condition = api, recorder, ready_condition
        # The resourceVersion each Ready write produced, until its watch event is seen.
        self.written: dict[ObjectRef, str] = {}

    def own_write(self, obj: JSON) -> bool:
        """True for the watch event of our own Ready write: not a change to reconcile. It
        would bring a reconcile at once, past the failure's backoff, and with an error
        whose text varies (a request id) each failure would write again: a hot loop. The
        entry goes with the object's next event either way (an event that came before the
        write's answer was scheduled as usual: one extra reconcile, no loop)."""
        return self.written.pop(meta.key(obj), None) == meta.resource_version(obj)

    def forget(self, ref: ObjectRef) -> None:
        self.written.pop(ref, None)

    @property
    def active(self) -> bool:
        return self.recorder is not None or self.ready_condition

    async def succeeded(self, obj: JSON) -> None:
        if self.ready_condition:
            await self._ready(obj, "True", RECONCILED, "")

    async def failed(self, obj: JSON, exc: BaseException) -> None:
        reason, note = failure_reason(exc), failure_note(exc)
        if self.recorder is not None:
            resource = await self.api.resource()  # list items of built-in types have no kind
            await self.recorder.publish(obj, reason=reason, note=note, type="Warning",
                                        api_version=resource.api_version, kind=resource.kind)
        if self.ready_condition:
            await self._ready(obj, "False", reason, note)

    async def _ready(self, obj: JSON, status: Any, reason: str, message: str) -> None:
        """Patch ``status.conditions`` only if the Ready condition changed; conditional on
        the resourceVersion reconciled, so a newer status (the reconcile's own write) is
        never overwritten: that version's watch event brings another reconcile, which
        sets it then."""
        copy = {"metadata": obj.get("metadata", {}), "status": dict(obj.get("status") or {})}
        conditions = copy["status"].get("conditions")
        copy["status"]["conditions"] = list(conditions) if isinstance(conditions, list) else []
        if not set_condition(copy, READY, status, reason, message[:32768]):
            return  # nothing changed: no request
        patch = {"metadata": {"resourceVersion": meta.resource_version(obj)},
                 "status": {"conditions": copy["status"]["conditions"]}}
        try:
            written = await self.api.patch_status(meta.name(obj), patch, type="merge",
                                                  namespace=meta.namespace(obj))
            if rv := meta.resource_version(written):
                self.written[meta.key(obj)] = rv
        except Conflict:
            log.debug("Ready condition of %s not written: the object changed meanwhile",
                      meta.ref(obj))
        except NotFound as exc:
            log.warning("cannot write the Ready condition of %s (deleted, or %s has no "
                        "status subresource): %s", meta.ref(obj), self.api.resource_name, exc)
        except ApiError as exc:
            log.warning("cannot write the Ready condition of %s: %s", meta.ref(obj), exc)
