"""Admission handlers and the AdmissionReview v1 they answer.

A validating handler allows by returning, denies by raising ``Denied`` (its message and
code reach ``kubectl``); a mutating handler returns the changed object (typed or a dict)
and the review carries the RFC 6902 patch from the object received to it. Either can add
``warnings`` (``request.warn``), which ``kubectl`` prints. A handler that raises anything
else, or outlives its ``timeout``, denies with a message saying so, or allows when its
``failure_policy`` is ``"Ignore"``; either way it is logged and counted.

``request.dry_run`` is the API server's ``dryRun``: nothing will be stored. A handler with
side effects (its configuration says ``sideEffects: NoneOnDryRun``) must not act then.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from watchkeeper.client.models import from_dict, to_dict
from watchkeeper.webhooks.jsonpatch import diff
from watchkeeper.webhooks.rules import Rules
from watchkeeper.webhooks.stats import HandlerStats

__all__ = ["AdmissionHandler", "AdmissionRequest", "Denied", "review_admission"]

log = logging.getLogger("watchkeeper.webhooks")

T = TypeVar("T")
JSON = dict[str, Any]
Handler = Callable[["AdmissionRequest[Any]"], "Awaitable[Any] | Any"]


class Denied(Exception):
    """Raised by a handler to refuse the request: ``message`` is what ``kubectl`` prints."""

    def __init__(self, message: str, code: int = 403) -> None:
        super().__init__(message)
        self.message, self.code = message, code


@dataclass
class AdmissionRequest(Generic[T]):
    """What a handler sees: the object (typed when the handler names a ``model``), the old
    object on UPDATE and DELETE, the operation, and whether this is a dry run."""

    uid: str
    operation: str
    object: T | None
    old_object: T | None
    dry_run: bool
    namespace: str | None
    name: str | None
    user: str | None
    raw: JSON
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        """A warning for the client (``kubectl`` prints ``Warning: <message>``)."""
        self.warnings.append(message)


@dataclass
class AdmissionHandler:
    """One registered handler: ``mutating`` or validating, ``model`` to get typed objects,
    ``timeout`` seconds, ``failure_policy`` when it raises or times out; ``rules``: which
    requests the API server sends it (its registration, ``watchkeeper webhooks``)."""

    path: str
    fn: Handler
    mutating: bool = False
    model: type | None = None
    timeout: float = 10.0
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    rules: Rules = field(default_factory=Rules)
    stats: HandlerStats = field(default_factory=HandlerStats)

    def __post_init__(self) -> None:
        if self.failure_policy not in ("Fail", "Ignore"):
            raise ValueError(f"failure_policy must be 'Fail' or 'Ignore', not "
                             f"{self.failure_policy!r}")

    def _typed(self, raw: JSON | None) -> Any:
        if raw is None or self.model is None:
            return raw
        return from_dict(self.model, raw)


def _response(uid: str, allowed: bool, *, code: int | None = None, message: str | None = None,
              warnings: list[str] | None = None, patch: list[JSON] | None = None) -> JSON:
    resp: JSON = {"uid": uid, "allowed": allowed}
    if code is not None or message is not None:
        resp["status"] = {k: v for k, v in (("code", code), ("message", message))
                          if v is not None}
    if warnings:
        resp["warnings"] = warnings
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}


async def review_admission(handler: AdmissionHandler, review: JSON) -> JSON:
    """The AdmissionReview answering ``review`` (its request's uid echoed)."""
    req = review.get("request")
    if not isinstance(req, dict) or not isinstance(req.get("uid"), str):
        raise ValueError("not an AdmissionReview: no request.uid")
    uid, stats, started = req["uid"], handler.stats, time.monotonic()
    raw_obj = req.get("object")
    deadline: asyncio.Timeout | None = None
    try:
        request = AdmissionRequest[Any](
            uid=uid, operation=str(req.get("operation", "")),
            object=handler._typed(raw_obj), old_object=handler._typed(req.get("oldObject")),
            dry_run=bool(req.get("dryRun", False)), namespace=req.get("namespace"),
            name=req.get("name"), user=(req.get("userInfo") or {}).get("username"), raw=req)
        result = handler.fn(request)
        if inspect.isawaitable(result):
            async with asyncio.timeout(handler.timeout) as deadline:
                result = await result
    except Denied as exc:
        stats.record(time.monotonic() - started, denied=True)
        return _response(uid, False, code=exc.code, message=exc.message,
                         warnings=request.warnings)
    except Exception as exc:
        timed_out = deadline is not None and deadline.expired()  # (not a TimeoutError of its own)
        what = (f"timed out after {handler.timeout:g}s" if timed_out
                else f"failed: {type(exc).__name__}: {exc}")
        message = f"admission webhook {handler.path} {what}"
        log.error("%s (uid %s, failurePolicy %s)", message, uid, handler.failure_policy,
                  exc_info=not timed_out)
        allow = handler.failure_policy == "Ignore"
        stats.record(time.monotonic() - started, denied=not allow, error=True)
        if allow:
            return _response(uid, True, warnings=[f"{message}; allowed (failurePolicy Ignore)"])
        return _response(uid, False, code=500, message=message)
    patch: list[JSON] | None = None
    if handler.mutating and result is not None:
        new = result if isinstance(result, dict) else to_dict(result)
        patch = diff(raw_obj, new)
    stats.record(time.monotonic() - started)
    return _response(uid, True, warnings=request.warnings, patch=patch)
