"""The default ClusterRoles and ClusterRoleBindings (and APF objects) a 1.28 apiserver
reconciles at start.

kube-apiserver's RBAC bootstrap policy makes discovery, /version and the self-reviews open
through ordinary stored objects (system:discovery, system:public-info-viewer,
system:basic-user), and ships the user-facing roles cluster-admin, admin, edit and view.
Storing the same objects here means ``kubectl get clusterroles`` shows them, a test can bind
a user to ``view`` or ``edit`` as on a cluster, and deleting one has the same effect it would
(until the next restart, which reconciles them again).

Only the roles a user or a client under test meets are included; the per-controller and node
roles (system:controller:*, system:node, system:kube-scheduler, ...) are left out, since no
such component runs against the simulator. The admin/edit/view rules keep every upstream rule,
also those for resources the simulator does not serve.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

RBAC_V1 = "rbac.authorization.k8s.io/v1"
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
MANAGER = "kube-apiserver"

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
ALL = tuple(sorted(READ + WRITE))


def _rule(groups: tuple[str, ...], resources: tuple[str, ...], verbs: tuple[str, ...]) -> JSON:
    return {"apiGroups": list(groups), "resources": sorted(resources), "verbs": list(verbs)}


def _urls(urls: tuple[str, ...], verbs: tuple[str, ...] = ("get",)) -> JSON:
    return {"nonResourceURLs": sorted(urls), "verbs": list(verbs)}


AGGREGATE_TO_VIEW = (
    _rule(("",), ("configmaps", "endpoints", "persistentvolumeclaims",
                  "persistentvolumeclaims/status", "pods", "replicationcontrollers",
                  "replicationcontrollers/scale", "serviceaccounts", "services",
                  "services/status"), READ),
    _rule(("",), ("bindings", "events", "limitranges", "namespaces/status", "pods/log",
                  "pods/status", "replicationcontrollers/status", "resourcequotas",
                  "resourcequotas/status"), READ),
    _rule(("",), ("namespaces",), READ),
    _rule(("discovery.k8s.io",), ("endpointslices",), READ),
    _rule(("apps",), ("controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                      "deployments/scale", "deployments/status", "replicasets",
                      "replicasets/scale", "replicasets/status", "statefulsets",
                      "statefulsets/scale", "statefulsets/status"), READ),
    _rule(("autoscaling",), ("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
          READ),
    _rule(("batch",), ("cronjobs", "cronjobs/status", "jobs", "jobs/status"), READ),
    _rule(("extensions",), ("daemonsets", "daemonsets/status", "deployments",
                            "deployments/scale", "deployments/status", "ingresses",
                            "ingresses/status", "networkpolicies", "replicasets",
                            "replicasets/scale", "replicasets/status",
                            "replicationcontrollers/scale"), READ),
    _rule(("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status"), READ),
    _rule(("networking.k8s.io",), ("ingresses", "ingresses/status", "networkpolicies"), READ),
)

AGGREGATE_TO_EDIT = (
    _rule(("",), ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                  "services/proxy"), READ),
    _rule(("",), ("serviceaccounts",), ("impersonate",)),
    _rule(("",), ("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"), WRITE),
    _rule(("",), ("pods/eviction",), ("create",)),
    _rule(("",), ("configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                  "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
                  "services/proxy"), WRITE),
    _rule(("",), ("serviceaccounts/token",), ("create",)),
    _rule(("apps",), ("daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                      "replicasets", "replicasets/scale", "statefulsets",
                      "statefulsets/scale"), WRITE),
    _rule(("autoscaling",), ("horizontalpodautoscalers",), WRITE),
    _rule(("batch",), ("cronjobs", "jobs"), WRITE),
    _rule(("extensions",), ("daemonsets", "deployments", "deployments/rollback",
                            "deployments/scale", "ingresses", "networkpolicies", "replicasets",
                            "replicasets/scale", "replicationcontrollers/scale"), WRITE),
    _rule(("policy",), ("poddisruptionbudgets",), WRITE),
    _rule(("networking.k8s.io",), ("ingresses", "networkpolicies"), WRITE),
    _rule(("coordination.k8s.io",), ("leases",), ALL),
)

AGGREGATE_TO_ADMIN = (
    _rule(("authorization.k8s.io",), ("localsubjectaccessreviews",), ("create",)),
    _rule(("rbac.authorization.k8s.io",), ("rolebindings", "roles"), ALL),
)


def _meta(name: str, labels: JSON | None = None) -> JSON:
    return {"name": name, "labels": {**BOOTSTRAP_LABEL, **(labels or {})},
            "annotations": dict(AUTOUPDATE)}


def cluster_role(name: str, rules: tuple[JSON, ...], labels: JSON | None = None,
                 aggregate_from: str | None = None) -> JSON:
    """A bootstrap ClusterRole; ``aggregate_from`` makes it aggregated (admin/edit/view):
    its rules are then those the aggregation controller would have filled in."""
    obj: JSON = {"apiVersion": RBAC_V1, "kind": "ClusterRole",
                 "metadata": _meta(name, labels), "rules": list(rules)}
    if aggregate_from is not None:
        obj["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"{AGGREGATE}{aggregate_from}": "true"}}]}
    return obj


def cluster_role_binding(name: str, groups: tuple[str, ...], role: str | None = None) -> JSON:
    return {
        "apiVersion": RBAC_V1, "kind": "ClusterRoleBinding", "metadata": _meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role or name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                     for g in groups],
    }


def _union(*rule_sets: tuple[JSON, ...]) -> tuple[JSON, ...]:
    out: list[JSON] = []
    for rules in rule_sets:
        out.extend(r for r in rules if r not in out)
    return tuple(out)


_VIEW = AGGREGATE_TO_VIEW
_EDIT = _union(AGGREGATE_TO_EDIT, _VIEW)
_ADMIN = _union(_EDIT, AGGREGATE_TO_ADMIN)

CLUSTER_ROLES: tuple[JSON, ...] = (
    cluster_role("admin", _ADMIN, aggregate_from="admin"),
    cluster_role("cluster-admin", (_rule(("*",), ("*",), ("*",)), _urls(("*",), ("*",)))),
    cluster_role("edit", _EDIT, {f"{AGGREGATE}admin": "true"}, aggregate_from="edit"),
    cluster_role("system:aggregate-to-admin", AGGREGATE_TO_ADMIN, {f"{AGGREGATE}admin": "true"}),
    cluster_role("system:aggregate-to-edit", AGGREGATE_TO_EDIT, {f"{AGGREGATE}edit": "true"}),
    cluster_role("system:aggregate-to-view", AGGREGATE_TO_VIEW, {f"{AGGREGATE}view": "true"}),
    cluster_role("system:auth-delegator", (
        _rule(("authentication.k8s.io",), ("tokenreviews",), ("create",)),
        _rule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)))),
    cluster_role("system:basic-user", (
        _rule(("authorization.k8s.io",), ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
              ("create",)),
        _rule(("authentication.k8s.io",), ("selfsubjectreviews",), ("create",)))),
    cluster_role("system:discovery", (_urls((
        "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
        "/readyz", "/version", "/version/")),)),
    cluster_role("system:monitoring", (_urls((
        "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz",
        "/readyz/*")),)),
    cluster_role("system:public-info-viewer", (_urls((
        "/healthz", "/livez", "/readyz", "/version", "/version/")),)),
    cluster_role("system:service-account-issuer-discovery", (_urls((
        "/.well-known/openid-configuration", "/openid/v1/jwks")),)),
    cluster_role("view", _VIEW, {f"{AGGREGATE}edit": "true"}, aggregate_from="view"),
)

CLUSTER_ROLE_BINDINGS: tuple[JSON, ...] = (
    cluster_role_binding("cluster-admin", ("system:masters",)),
    cluster_role_binding("system:basic-user", ("system:authenticated",)),
    cluster_role_binding("system:discovery", ("system:authenticated",)),
    cluster_role_binding("system:monitoring", ("system:monitoring",)),
    cluster_role_binding("system:public-info-viewer",
                         ("system:authenticated", "system:unauthenticated")),
    cluster_role_binding("system:service-account-issuer-discovery", ("system:serviceaccounts",)),
)


APF_V1BETA3 = "flowcontrol.apiserver.k8s.io/v1beta3"
APF_MANAGER = "api-priority-and-fairness-config-producer-v1"
APF_AUTOUPDATE = {"apf.kubernetes.io/autoupdate-spec": "true"}
_EVERYTHING = {
    "subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                       "clusterScope": True, "namespaces": ["*"]}],
    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
}
# The mandatory "exempt" priority level and flow schema (system:masters is never queued): the
# objects file 135 reads. The other default levels are left out, since their v1beta2 and
# v1beta3 shapes differ and the simulator does not convert between versions.
APF_OBJECTS: tuple[JSON, ...] = (
    {"apiVersion": APF_V1BETA3, "kind": "PriorityLevelConfiguration",
     "metadata": {"name": "exempt", "annotations": dict(APF_AUTOUPDATE)},
     "spec": {"type": "Exempt",
              "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}},
    {"apiVersion": APF_V1BETA3, "kind": "FlowSchema",
     "metadata": {"name": "exempt", "annotations": dict(APF_AUTOUPDATE)},
     "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1,
              "rules": [_EVERYTHING]}},
)


def bootstrap_objects() -> tuple[tuple[JSON, str], ...]:
    """Every default object with the manager that writes it: policy roles before bindings
    (as the RBAC reconciler writes them), then the APF configuration."""
    return (*((o, MANAGER) for o in CLUSTER_ROLES + CLUSTER_ROLE_BINDINGS),
            *((o, APF_MANAGER) for o in APF_OBJECTS))
