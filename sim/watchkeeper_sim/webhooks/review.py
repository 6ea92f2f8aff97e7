"""The AdmissionReview v1 a webhook is sent, and what of its answer the API server accepts.

The request is ``request.CreateV1AdmissionReview`` (recorded: the issue 24 reference files):
the resource's kind and resource (also as requestKind/requestResource, the simulator
converting nothing), the user, the object and old object (``null`` where there is none), the
operation's options as meta.k8s.io/v1 CreateOptions/UpdateOptions/DeleteOptions. The answer
is checked as ``VerifyAdmissionResponse`` checks it; each refusal is a :class:`BadAnswer`
whose text the API server quotes after ``failed to call webhook: `` (what does not decode as
a v1 AdmissionReview) or ``received invalid webhook response: `` (the rest).
"""

from __future__ import annotations

import base64
import binascii
import uuid

from watchkeeper_sim.model import JSON
from watchkeeper_sim.webhooks.matching import Attributes

V1 = "admission.k8s.io/v1"


class BadAnswer(Exception):
    """The webhook's answer is unusable; ``decoding`` when it is no v1 AdmissionReview."""

    def __init__(self, message: str, decoding: bool = False) -> None:
        super().__init__(message)
        self.decoding = decoding


def request(attrs: Attributes, obj: JSON | None, old: JSON | None) -> tuple[str, JSON]:
    """(uid, review) for one call; a new uid per call, as the dispatcher makes."""
    uid = str(uuid.uuid4())
    rt = attrs.rt
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    body: JSON = {"uid": uid, "kind": kind, "resource": resource}
    if attrs.subresource:
        body["subResource"] = attrs.subresource
    asked = attrs.request_rt or rt  # the version of the request (matchPolicy Equivalent)
    body["requestKind"] = {"group": asked.group, "version": asked.version, "kind": asked.kind}
    body["requestResource"] = {"group": asked.group, "version": asked.version,
                               "resource": asked.plural}
    if attrs.subresource:
        body["requestSubResource"] = attrs.subresource
    if attrs.name:
        body["name"] = attrs.name
    if attrs.namespace:
        body["namespace"] = attrs.namespace
    body.update({"operation": attrs.operation, "userInfo": attrs.user_info, "object": obj,
                 "oldObject": old, "dryRun": attrs.dry_run, "options": attrs.options})
    return uid, {"kind": "AdmissionReview", "apiVersion": V1, "request": body}


def _patch_bytes(response: JSON) -> bytes:
    patch = response.get("patch")
    if not patch:
        return b""
    try:
        return base64.b64decode(str(patch), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadAnswer(f"illegal base64 data: {exc}", decoding=True) from None


def verify(uid: str, mutating: bool, answer: JSON) -> tuple[JSON, bytes]:
    """(the response, its decoded patch), or :class:`BadAnswer`."""
    version = answer.get("apiVersion")
    if version == "admission.k8s.io/v1beta1" and answer.get("kind") == "AdmissionReview":
        raise BadAnswer("converting (v1beta1.AdmissionReview) to (v1.AdmissionReview): "
                        "unknown conversion", decoding=True)
    response = answer.get("response")
    if not isinstance(response, dict):
        raise BadAnswer("webhook response was absent")
    if response.get("uid") != uid:
        got = response.get("uid") or ""
        raise BadAnswer(f'expected response.uid="{uid}", got "{got}"')
    if version != V1 or answer.get("kind") != "AdmissionReview":
        group, _, ver = str(version or "").rpartition("/")
        raise BadAnswer("expected webhook response of admission.k8s.io/v1, "
                        f"Kind=AdmissionReview, got {group}/{ver}, Kind={answer.get('kind')}")
    patch = _patch_bytes(response)
    patch_type = response.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise BadAnswer("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise BadAnswer("webhook returned response.patchType but not response.patch")
        if patch_type is not None and not patch_type:
            raise BadAnswer('webhook returned invalid response.patchType of ""')
    else:
        if patch:
            raise BadAnswer("validating webhook may not return response.patch")
        if patch_type is not None:
            raise BadAnswer("validating webhook may not return response.patchType")
    return response, patch
