"""CRD conversion webhooks, called as kube-apiserver 1.28 calls them.

apiextensions-apiserver's webhook_converter.go: one ConversionReview per object (a list from
storage is decoded, and converted, object by object), the response checked (kind, uid, a
Success result, one object back at the desired apiVersion and of the same kind, the same
name, namespace and uid) and the object's metadata restored but for its labels and
annotations, which are validated. Every failure reads ``conversion webhook for
<group>/<version>, Kind=<Kind> ...`` (the version the object had), which the API server
answers as a reason-less 500 (tests/fixtures/apiserver-1.28-issue24-conversion).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage import metavalid as _metavalid
from watchkeeper_sim.webhooks.call import WebhookCaller, WebhookCallError

#: the webhook client's http.Client timeout (k8s.io/apiserver/pkg/util/webhook): conversion
#: has no timeoutSeconds of its own
TIMEOUT = 30.0
_GO_TIMEOUT = "net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
_REVIEW_VERSIONS = ("v1beta1", "v1")


class ConversionFailed(Exception):
    """The object could not be converted; ``str()`` is the API server's message."""


@dataclass(frozen=True)
class WebhookConversion:
    """A CRD's ``spec.conversion`` when its strategy is Webhook."""

    crd_name: str
    client_config: JSON
    review_versions: tuple[str, ...]
    storage_version: str


def of_crd(crd: JSON | None) -> WebhookConversion | None:
    """The CRD's webhook conversion, or None (no CRD, strategy None: apiVersion only)."""
    spec = (crd or {}).get("spec") or {}
    conversion = spec.get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    webhook = conversion.get("webhook") or {}
    storage = next((str(v.get("name")) for v in spec.get("versions") or []
                    if v.get("storage")), "")
    return WebhookConversion(
        crd_name=str(((crd or {}).get("metadata") or {}).get("name") or ""),
        client_config=dict(webhook.get("clientConfig") or {}),
        review_versions=tuple(str(v) for v in webhook.get("conversionReviewVersions") or ()),
        storage_version=storage,
    )


def _gvk(obj: JSON) -> str:
    """Go's GroupVersionKind.String() of an object's type."""
    return f"{obj.get('apiVersion') or ''}, Kind={obj.get('kind') or ''}"


def _name(obj: JSON, field: str) -> str:
    meta = obj.get("metadata")
    return str(meta.get(field) or "") if isinstance(meta, dict) else ""


def review(review_version: str, obj: JSON, desired: str, uid: str) -> JSON:
    """The ConversionReview the API server posts (its empty response stanza included)."""
    return {"kind": "ConversionReview", "apiVersion": f"apiextensions.k8s.io/{review_version}",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [obj]},
            "response": {"uid": "", "convertedObjects": None, "result": {"metadata": {}}}}


def _converted_objects(answer: JSON, review_version: str, uid: str) -> list[Any]:
    """getConvertedObjectsFromResponse; raises ValueError with its words."""
    if review_version == "v1":
        got = f"{answer.get('apiVersion') or ''}, Kind={answer.get('kind') or ''}"
        if got != "apiextensions.k8s.io/v1, Kind=ConversionReview":
            raise ValueError("expected webhook response of apiextensions.k8s.io/v1, "
                             f"Kind=ConversionReview, got {got}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise ValueError("no response provided")
    if review_version == "v1" and response.get("uid") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise ValueError(str(result["message"]))
        raise ValueError(f"response.result.status was '{result.get('status') or ''}', not "
                         "'Success'")
    return list(response.get("convertedObjects") or [])


def _go_type(value: Any) -> str:
    """Go's %T of a value decoded into an unstructured object."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "[]interface {}" if isinstance(value, list) else "map[string]interface {}"


def _restore_meta(original: JSON, converted: JSON) -> str | None:
    """restoreObjectMeta: the original metadata with the webhook's labels and annotations;
    the error text, or None."""
    answered = converted.get("metadata")
    if not isinstance(answered, dict):
        return ("missing metadata in converted object" if answered is None
                else f"invalid metadata of type {_go_type(answered)} in converted object")
    meta = copy.deepcopy(original.get("metadata") or {})
    for field in ("labels", "annotations"):
        value = answered.get(field)
        if value is None:
            meta.pop(field, None)
            continue
        if not isinstance(value, dict):
            return (f"invalid metadata.{field} of type {_go_type(value)} in converted "
                    "object")
        for key, item in value.items():
            if not isinstance(item, str):
                return (f"metadata.{field}[{key}] must be a string, but is "
                        f"{_go_type(item)} in converted object")
        if value != (meta.get(field) or {}):
            causes = _metavalid.metadata_causes({"metadata": {field: value}})
            if causes:
                path = "metadata.labels" if field == "labels" else "metadata.annotation"
                errs = [f"{path}: {c['message']}" for c in causes]
                return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        meta[field] = value
    converted["metadata"] = meta
    return None


class Converter:
    """Converts custom resources between the versions of their CRD through its webhook."""

    def __init__(self, caller: WebhookCaller, timeout: float = TIMEOUT) -> None:
        self.caller = caller
        self.timeout = timeout

    async def convert(self, conversion: WebhookConversion, obj: JSON, desired: str) -> JSON:
        """``obj`` at apiVersion ``desired`` (itself when it is at it already)."""
        if obj.get("apiVersion") == desired:
            return obj
        prefix = f"conversion webhook for {_gvk(obj)}"
        review_version = next((v for v in conversion.review_versions
                               if v in _REVIEW_VERSIONS), None)
        if review_version is None:
            raise ConversionFailed("no supported conversion review versions")
        uid = str(uuid.uuid4())
        sent = dict(obj)
        if isinstance(obj.get("metadata"), dict):  # etcd's decoder sets it after conversion
            sent["metadata"] = {k: v for k, v in obj["metadata"].items()
                                if k != "resourceVersion"}
        try:
            answer = await self.caller.post(conversion.client_config,
                                            review(review_version, sent, desired, uid),
                                            self.timeout)
        except WebhookCallError as exc:
            text = str(exc)
            if isinstance(exc.__cause__, TimeoutError):
                text = text.replace("context deadline exceeded", _GO_TIMEOUT)
            raise ConversionFailed(f"{prefix} failed: {text}") from None
        try:
            objects = _converted_objects(answer, review_version, uid)
        except ValueError as exc:
            raise ConversionFailed(f"{prefix} failed: {exc}") from None
        if len(objects) != 1:
            raise ConversionFailed(f"{prefix} returned {len(objects)} objects, expected 1")
        converted = objects[0]
        if not isinstance(converted, dict):
            raise ConversionFailed(f"{prefix} failed: json: cannot unmarshal "
                                   f"{_metavalid.json_type(converted)} into an object")
        invalid = f"{prefix} returned invalid object"
        if converted.get("apiVersion") != desired:
            raise ConversionFailed(
                f"{invalid} at index 0: invalid groupVersion (expected {desired}, received "
                f"{converted.get('apiVersion') or ''})")
        if converted.get("kind") != obj.get("kind"):
            raise ConversionFailed(
                f"{invalid} at index 0: invalid kind (expected {obj.get('kind')}, received "
                f"{converted.get('kind') or ''})")
        for field, what in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
            before, after = _name(obj, field), _name(converted, field)
            if before != after:
                raise ConversionFailed(f"{invalid}: must have the same {what}: {before} != "
                                       f"{after}")
        wrong = _restore_meta(obj, converted)
        if wrong is not None:
            raise ConversionFailed(f"{prefix} returned invalid metadata: {wrong}")
        return converted
