"""The CRD conversion webhook: a ConversionReview v1 answered with the conversion functions
declared with the classes (``@wk.conversion``, ``wk.convert``).

Every object is converted, or the review fails as a whole (``result.status: Failure`` and
the message): the API server then fails the read or write that needed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.client.models import to_dict
from watchkeeper.typed.conversion import convert
from watchkeeper.typed.models import CustomResource
from watchkeeper.webhooks.stats import HandlerStats

__all__ = ["ConversionHandler", "review_conversion"]

log = logging.getLogger("watchkeeper.webhooks")
JSON = dict[str, Any]


@dataclass
class ConversionHandler:
    """The versions of one resource (their classes) this path converts between."""

    path: str
    versions: Sequence[type[CustomResource]]
    stats: HandlerStats = field(default_factory=HandlerStats)

    def __post_init__(self) -> None:
        kinds = {(c.identity().group, c.identity().kind) for c in self.versions}
        if len(kinds) != 1:
            raise ValueError(f"conversion webhook {self.path}: the classes must be versions "
                             f"of one resource, not {sorted(kinds)}")

    def target(self, api_version: str) -> type[CustomResource]:
        for cls in self.versions:
            if cls.identity().api_version == api_version:
                return cls
        raise ValueError(f"no class for desiredAPIVersion {api_version}")


def review_conversion(handler: ConversionHandler, review: JSON) -> JSON:
    """The ConversionReview answering ``review`` (its request's uid echoed)."""
    req = review.get("request")
    if not isinstance(req, dict) or not isinstance(req.get("uid"), str):
        raise ValueError("not a ConversionReview: no request.uid")
    uid, started = req["uid"], time.monotonic()
    response: JSON = {"uid": uid}
    try:
        target = handler.target(str(req.get("desiredAPIVersion")))
        converted = [obj if obj.get("apiVersion") == req["desiredAPIVersion"]
                     else to_dict(convert(obj, target)) for obj in req.get("objects") or []]
    except Exception as exc:
        message = f"conversion webhook {handler.path}: {type(exc).__name__}: {exc}"
        log.error("%s (uid %s)", message, uid)
        handler.stats.record(time.monotonic() - started, error=True)
        response.update(convertedObjects=[], result={"status": "Failure", "message": message})
    else:
        handler.stats.record(time.monotonic() - started)
        response.update(convertedObjects=converted, result={"status": "Success"})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": response}
