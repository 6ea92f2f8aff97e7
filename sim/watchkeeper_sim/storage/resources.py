"""The built-in resource types the simulator serves, and CRD -> ResourceType conversion."""

from __future__ import annotations

import dataclasses
from typing import Any

from watchkeeper_sim.model import PrinterColumn, ResourceType, ScalePaths
from watchkeeper_sim.status import go_quote

JSON = dict[str, Any]

_RO = ("get", "list", "watch")
AUTHN_GROUP = "authentication.k8s.io"
AUTHZ_GROUP = "authorization.k8s.io"
FLOWCONTROL_GROUP = "flowcontrol.apiserver.k8s.io"
_CREATE_ONLY = ("create",)
# Namespaces have no deletecollection (file 004): DELETE /api/v1/namespaces is a 405.
_NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    status: bool = False,
    generation: bool = False,
    categories: tuple[str, ...] = (),
    verbs: tuple[str, ...] | None = None,
) -> ResourceType:
    rt = ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        singular=kind.lower(),
        short_names=short,
        has_status=status,
        categories=categories,
        has_generation=generation,
    )
    return rt if verbs is None else dataclasses.replace(rt, verbs=verbs)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", False, ("ns",), status=True,
        verbs=_NAMESPACE_VERBS),
    _rt("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _rt("", "v1", "secrets", "Secret"),
    _rt("", "v1", "pods", "Pod", short=("po",), status=True, categories=("all",)),
    _rt("", "v1", "services", "Service", short=("svc",), status=True, categories=("all",)),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _rt("", "v1", "events", "Event", short=("ev",)),
    _rt("apps", "v1", "deployments", "Deployment", short=("deploy",), status=True,
        generation=True, categories=("all",)),
    _rt("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), status=True,
        generation=True, categories=("all",)),
    _rt("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), status=True,
        generation=True, categories=("all",)),
    _rt("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), status=True,
        generation=True, categories=("all",)),
    _rt("batch", "v1", "jobs", "Job", status=True, generation=True, categories=("all",)),
    _rt("batch", "v1", "cronjobs", "CronJob", short=("cj",), status=True, generation=True,
        categories=("all",)),
    _rt("coordination.k8s.io", "v1", "leases", "Lease"),
    dataclasses.replace(_rt("events.k8s.io", "v1", "events", "Event", short=("ev",)),
                        shares=("", "events")),  # one set of Events, two views (_events.py)
    _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
        False, ("crd", "crds"), status=True, generation=True, categories=("api-extensions",)),
    # stored, not yet called: the simulator does not send admission reviews (docs/guide.md)
    _rt("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration", False, generation=True,
        categories=("api-extensions",)),
    _rt("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration", False, generation=True,
        categories=("api-extensions",)),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # API Priority and Fairness configuration: v1beta3 preferred, v1beta2 deprecated (135)
    *(_rt(FLOWCONTROL_GROUP, version, plural, kind, False, status=True, generation=True)
      for version in ("v1beta3", "v1beta2")
      for plural, kind in (("flowschemas", "FlowSchema"),
                           ("prioritylevelconfigurations", "PriorityLevelConfiguration"))),
    # the review APIs: create-only, nothing stored (see _reviews.py); TokenReview is not served
    _rt(AUTHN_GROUP, "v1", "selfsubjectreviews", "SelfSubjectReview", False,
        verbs=_CREATE_ONLY),
    _rt(AUTHZ_GROUP, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
        verbs=_CREATE_ONLY),
    _rt(AUTHZ_GROUP, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
        verbs=_CREATE_ONLY),
    _rt(AUTHZ_GROUP, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
        verbs=_CREATE_ONLY),
    _rt(AUTHZ_GROUP, "v1", "subjectaccessreviews", "SubjectAccessReview", False,
        verbs=_CREATE_ONLY),
)

CRD_GROUP = "apiextensions.k8s.io"


class CRDError(ValueError):
    """The CRD cannot be served; ``causes`` are 422 causes (field, message)."""

    def __init__(self, causes: list[tuple[str, str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {m}" for _, f, m in causes))
        self.causes = causes


def printer_columns(version: Any) -> tuple[PrinterColumn, ...]:
    """A CRD version's additionalPrinterColumns (entries without a name or jsonPath, which
    the apiserver's validation refuses, are skipped here)."""
    raw = version.get("additionalPrinterColumns") if isinstance(version, dict) else None
    out: list[PrinterColumn] = []
    for col in raw if isinstance(raw, list) else ():
        if not isinstance(col, dict) or not col.get("name") or not col.get("jsonPath"):
            continue
        out.append(PrinterColumn(
            name=str(col["name"]), type=str(col.get("type") or "string"),
            json_path=str(col["jsonPath"]), format=str(col.get("format") or ""),
            description=str(col.get("description") or ""),
            priority=int(col.get("priority") or 0)))
    return tuple(out)


def crd_types(crd: JSON) -> list[ResourceType]:
    """The ResourceTypes a CRD serves (one per served version); raises CRDError if unusable."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    kind = names.get("kind") or ""
    scope = spec.get("scope") or ""
    causes: list[tuple[str, str, str]] = []
    if not group:
        causes.append(("FieldValueRequired", "spec.group", "Required value"))
    if not plural:
        causes.append(("FieldValueRequired", "spec.names.plural", "Required value"))
    if not kind:
        causes.append(("FieldValueRequired", "spec.names.kind", "Required value"))
    if scope not in ("Namespaced", "Cluster"):
        causes.append(("FieldValueNotSupported", "spec.scope",
                       f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'))
    name = (crd.get("metadata") or {}).get("name", "")
    if plural and group and name != f"{plural}.{group}":
        causes.append(("FieldValueInvalid", "metadata.name",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(("FieldValueRequired", "spec.versions", "Required value"))
    causes += _conversion_causes(spec.get("conversion"))
    if causes:
        raise CRDError(causes)
    out = []
    for v in versions:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        out.append(
            ResourceType(
                group=group,
                version=str(v.get("name")),
                plural=plural,
                kind=kind,
                namespaced=scope == "Namespaced",
                singular=names.get("singular") or kind.lower(),
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in subs,
                is_custom=True,
                categories=tuple(names.get("categories") or ()),
                has_generation=True,
                printer_columns=printer_columns(v),
                scale=_scale_paths(subs.get("scale")),
            )
        )
    return out


def _conversion_causes(conversion: Any) -> list[tuple[str, str, str]]:
    """A webhook must speak a ConversionReview version the API server knows (file 001 of
    tests/fixtures/apiserver-1.28-issue24-conversion)."""
    if not isinstance(conversion, dict) or conversion.get("strategy") != "Webhook":
        return []
    review = (conversion.get("webhook") or {}).get("conversionReviewVersions")
    if not isinstance(review, list) or any(v in ("v1", "v1beta1") for v in review):
        return []
    shown = "[]string{" + ", ".join(go_quote(str(v)) for v in review) + "}"
    return [("FieldValueInvalid", "spec.conversion.conversionReviewVersions",
             f"Invalid value: {shown}: must include at least one of v1, v1beta1")]


def _scale_paths(scale: Any) -> ScalePaths | None:
    if not isinstance(scale, dict):
        return None
    return ScalePaths(str(scale.get("specReplicasPath") or ""),
                      str(scale.get("statusReplicasPath") or ""),
                      str(scale.get("labelSelectorPath") or ""))
