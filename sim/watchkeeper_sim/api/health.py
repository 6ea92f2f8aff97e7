"""Health endpoints (/readyz, /livez, /healthz): "ok", or with ``?verbose`` the check list.

The names and their order are those of kube-apiserver 1.28.7 (file 134); /livez and /healthz
lack the readiness-only checks (etcd-readiness, informer-sync, shutdown).
"""

from __future__ import annotations

from collections.abc import Mapping

_HOOKS = (
    "start-kube-apiserver-admission-initializer", "generic-apiserver-start-informers",
    "priority-and-fairness-config-consumer", "priority-and-fairness-filter",
    "storage-object-count-tracker-hook", "start-apiextensions-informers",
    "start-apiextensions-controllers", "crd-informer-synced",
    "start-service-ip-repair-controllers", "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes", "priority-and-fairness-config-producer",
    "start-system-namespaces-controller", "bootstrap-controller",
    "start-cluster-authentication-info-controller",
    "start-kube-apiserver-identity-lease-controller",
    "start-deprecated-kube-apiserver-identity-lease-garbage-collector",
    "start-kube-apiserver-identity-lease-garbage-collector",
    "start-legacy-token-tracking-controller", "start-kube-aggregator-informers",
    "apiservice-registration-controller", "apiservice-status-available-controller",
    "kube-apiserver-autoregistration",
)
_READY_ONLY = {"etcd-readiness", "informer-sync", "shutdown"}
READYZ_CHECKS = (
    "ping", "log", "etcd", "etcd-readiness", "informer-sync",
    *(f"poststarthook/{h}" for h in _HOOKS),
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
    "poststarthook/apiservice-discovery-controller",
    "shutdown",
)
HEALTH_PATHS = ("/healthz", "/readyz", "/livez")


def health_text(path: str, query: Mapping[str, str]) -> str:
    """The body of a passing health check at ``path`` (one of HEALTH_PATHS)."""
    if "verbose" not in query:
        return "ok"
    name = path.lstrip("/")
    checks = [c for c in READYZ_CHECKS if name == "readyz" or c not in _READY_ONLY]
    return "".join(f"[+]{c} ok\n" for c in checks) + f"{name} check passed\n"
