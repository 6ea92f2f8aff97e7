"""What a resource is (group, version, plural, kind, scope) and how a name finds one.

Built-in kinds resolve without a request; anything else (CRDs) is found once through
discovery and cached per client, so ``client.api("widgets.example.com")`` costs nothing
after the first call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from watchkeeper.client.errors import NotFound

__all__ = ["BUILTINS", "Resource", "UnknownResource", "parse_spec"]


class UnknownResource(NotFound):
    """No served resource matches the name (discovery found none): a 404 for the type, so a
    watcher surfaces and retries it like any other, and recovers once the CRD exists."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=404, reason="NotFound")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``plural.group`` as kubectl and RBAC messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path; ``namespace=None`` on a namespaced resource means all namespaces.

        Raises ValueError for a namespace, name or subresource that is not one path segment
        (as client-go does): "a/b" or ".." would silently address another object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{_segment('namespace', namespace)}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{_segment('object name', name)}"
            if subresource:
                base += f"/{_segment('subresource', subresource)}"
        return base

    def __str__(self) -> str:
        return f"{self.qualified} ({self.api_version} {self.kind})"


def _segment(what: str, value: str) -> str:
    """``value`` if it is a valid path segment name (apimachinery's IsValidPathSegmentName)."""
    if not value or value in (".", "..") or "/" in value or "%" in value:
        raise ValueError(
            f"invalid {what} {value!r}: it may not be empty, '.' or '..', "
            "nor contain '/' or '%'"
        )
    return value


def _r(gv: str, kind: str, plural: str, namespaced: bool = True) -> Resource:
    group, _, version = gv.rpartition("/")
    return Resource(group, version, kind, plural, namespaced)


BUILTINS: tuple[Resource, ...] = (
    _r("v1", "ConfigMap", "configmaps"),
    _r("v1", "Secret", "secrets"),
    _r("v1", "Pod", "pods"),
    _r("v1", "Service", "services"),
    _r("v1", "ServiceAccount", "serviceaccounts"),
    _r("v1", "Event", "events"),
    _r("v1", "Endpoints", "endpoints"),
    _r("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    _r("v1", "Namespace", "namespaces", False),
    _r("v1", "Node", "nodes", False),
    _r("v1", "PersistentVolume", "persistentvolumes", False),
    _r("apps/v1", "Deployment", "deployments"),
    _r("apps/v1", "ReplicaSet", "replicasets"),
    _r("apps/v1", "StatefulSet", "statefulsets"),
    _r("apps/v1", "DaemonSet", "daemonsets"),
    _r("batch/v1", "Job", "jobs"),
    _r("batch/v1", "CronJob", "cronjobs"),
    _r("coordination.k8s.io/v1", "Lease", "leases"),
    _r("events.k8s.io/v1", "Event", "events"),
    _r("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    _r("rbac.authorization.k8s.io/v1", "Role", "roles"),
    _r("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    _r("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    _r("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
)

_SHORT = {
    "cm": "configmaps", "po": "pods", "svc": "services", "sa": "serviceaccounts",
    "ns": "namespaces", "no": "nodes", "deploy": "deployments", "rs": "replicasets",
    "sts": "statefulsets", "ds": "daemonsets", "cj": "cronjobs", "crd": "customresourcedefinitions",
    "crds": "customresourcedefinitions", "ev": "events", "pvc": "persistentvolumeclaims",
    "pv": "persistentvolumes", "ep": "endpoints",
}


# Each dot- or slash-separated part of a resource name: letters, digits and inner dashes
# (plurals and groups are DNS names, kinds CamelCase). Anything else would end up in the
# URL as something other than a resource name ("pods?watch=1", "cm/../secrets").
_NAME_PART = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class Spec:
    """A parsed resource name: any part may be unknown until discovery fills it in."""

    name: str  # plural, singular or kind as given (lower-cased unless a kind)
    group: str | None
    version: str | None


def parse_spec(text: str) -> Spec:
    """Accept ``configmaps``, ``cm``, ``ConfigMap``, ``deployments.apps``, ``apps/v1/deployments``,
    ``widgets.example.com``, ``widgets.v1.example.com`` and ``example.com/v1/widgets``."""
    text = text.strip()
    if not all(_NAME_PART.fullmatch(part) for part in re.split(r"[./]", text)):
        raise ValueError(
            f"invalid resource name {text!r}: expected a plural, kind or short name "
            "('configmaps', 'ConfigMap', 'cm'), optionally with its group "
            "('deployments.apps') or as [group/]version/plural ('apps/v1/deployments')"
        )
    if "/" in text:
        parts = text.split("/")
        if len(parts) == 2:  # v1/configmaps
            return Spec(parts[1], "", parts[0])
        if len(parts) == 3:
            return Spec(parts[2], parts[0], parts[1])
        raise ValueError(f"invalid resource name {text!r}: expected [group/]version/plural")
    name, _, rest = text.partition(".")
    if not rest:
        return Spec(_SHORT.get(name, name), None, None)
    maybe_version, _, group = rest.partition(".")
    if group and maybe_version.startswith("v") and maybe_version[1:2].isdigit():
        return Spec(name, group, maybe_version)
    return Spec(name, rest, None)


def find_builtin(spec: Spec) -> Resource | None:
    """Match a spec against the built-ins by plural, kind (case-insensitive) or singular."""
    low = spec.name.lower()
    matches = [
        r for r in BUILTINS
        if low in (r.plural, r.kind.lower())
        and (spec.group is None or spec.group == r.group)
        and (spec.version is None or spec.version == r.version)
    ]
    # "events" without a group means core v1, like kubectl.
    core_first = sorted(matches, key=lambda r: r.group != "")
    return core_first[0] if core_first else None
