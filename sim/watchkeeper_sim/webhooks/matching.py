"""Which admission webhooks a request reaches, in kube-apiserver 1.28's order and by its rules.

The configurations are read as stored, with the API's defaults filled in here (the simulator
stores them undefaulted): failurePolicy Fail, timeoutSeconds 10, empty selectors, rule scope
``*``. Configurations run sorted by name, their webhooks in order. A rule matches on
operation, group, version, resource (``pods/status``, ``*``, ``*/*``) and scope
(``predicates/rules``); the namespaceSelector is checked against the labels of the request's
namespace, or of the namespace object itself when one is created or updated, and is ignored
for every other cluster-scoped resource (``predicates/namespace``); the objectSelector
against the new or the old object's labels (``predicates/object``). Webhook configurations
and validating admission policies are never sent to webhooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from watchkeeper_sim.model import JSON, ResourceType

GROUP = "admissionregistration.k8s.io"
#: kinds kube-apiserver never sends to webhooks (rules.IsExemptAdmissionConfigurationResource)
EXEMPT_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
DEFAULT_TIMEOUT = 10


@dataclass(frozen=True)
class Attributes:
    """One request as admission sees it (admission.Attributes)."""

    operation: str  # CREATE, UPDATE, DELETE
    rt: ResourceType
    namespace: str  # the namespace's own name for a namespace object
    name: str
    subresource: str
    user_info: JSON
    options: JSON
    dry_run: bool
    #: the resource the request was made at, when a webhook is shown an equivalent version
    request_rt: ResourceType | None = None


@dataclass(frozen=True)
class Hook:
    """One webhook of one configuration, defaulted."""

    configuration: str
    spec: JSON
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def fails_open(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"

    @property
    def timeout(self) -> float:
        value = self.spec.get("timeoutSeconds")
        return float(value) if isinstance(value, int) and value > 0 else DEFAULT_TIMEOUT

    @property
    def reinvoked_if_needed(self) -> bool:
        return self.spec.get("reinvocationPolicy") == "IfNeeded"

    @property
    def side_effects_on_dry_run(self) -> bool:
        """sideEffects Some or Unknown: a dry run must not reach it (v1 refuses both on
        write; the simulator stores them, so it checks as the dispatcher does)."""
        return self.spec.get("sideEffects") not in ("None", "NoneOnDryRun")


def hooks_of(configurations: list[JSON], mutating: bool) -> list[Hook]:
    """Every webhook of these configurations, in the order the API server calls them."""
    ordered = sorted(configurations, key=lambda c: str((c.get("metadata") or {}).get("name")))
    return [Hook(str(c["metadata"].get("name")), w, mutating)
            for c in ordered for w in c.get("webhooks") or [] if isinstance(w, dict)]


def exempt(rt: ResourceType) -> bool:
    return rt.group == GROUP and rt.kind in EXEMPT_KINDS


def _listed(items: Any, value: str) -> bool:
    return isinstance(items, list) and any(i in ("*", value) for i in items)


def _scope(rule: JSON, attrs: Attributes) -> bool:
    scope = rule.get("scope") or "*"
    is_ns = attrs.rt.group == "" and attrs.rt.plural == "namespaces"
    if scope == "Namespaced":
        return not is_ns and attrs.rt.namespaced
    if scope == "Cluster":
        return is_ns or not attrs.rt.namespaced
    return scope == "*"


def _resource(rule: JSON, attrs: Attributes) -> bool:
    for entry in rule.get("resources") or []:
        res, _, sub = str(entry).partition("/")
        if res in ("*", attrs.rt.plural) and sub in ("*", attrs.subresource):
            return True
    return False


def rules_match(hook: Hook, attrs: Attributes) -> bool:
    """Any of the webhook's rules covers the request at exactly its version (matchPolicy
    Equivalent, other versions of the same resource: ``Admission``)."""
    return any(isinstance(rule, dict)
               and _listed(rule.get("operations"), attrs.operation)
               and _listed(rule.get("apiGroups"), attrs.rt.group)
               and _listed(rule.get("apiVersions"), attrs.rt.version)
               and _resource(rule, attrs) and _scope(rule, attrs)
               for rule in hook.spec.get("rules") or [])


def equivalent(hook: Hook, attrs: Attributes, others: list[ResourceType]
               ) -> Attributes | None:
    """The request as the webhook is to see it: as made when a rule covers its version;
    else, with matchPolicy Equivalent (the v1 default), at the first other version of the
    same resource a rule covers (kube-apiserver converts the object to it); else None."""
    if rules_match(hook, attrs):
        return attrs
    if hook.spec.get("matchPolicy") == "Exact":
        return None
    for other in others:
        seen = replace(attrs, rt=other, request_rt=attrs.rt)
        if rules_match(hook, seen):
            return seen
    return None


def selector_matches(selector: Any, labels: JSON) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions) against a label map; an
    empty or absent selector matches everything."""
    if not isinstance(selector, dict):
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _labels(obj: JSON | None) -> JSON:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def object_selected(hook: Hook, obj: JSON | None, old: JSON | None) -> bool:
    selector = hook.spec.get("objectSelector")
    if not selector:
        return True
    return ((obj is not None and selector_matches(selector, _labels(obj)))
            or (old is not None and selector_matches(selector, _labels(old))))


#: the labels of a namespace by name, None when it does not exist
NamespaceLabels = Callable[[str], "JSON | None"]


def namespace_selected(hook: Hook, attrs: Attributes, obj: JSON | None,
                       namespace_labels: NamespaceLabels) -> bool | None:
    """True or False; None when the request's namespace does not exist (the API server then
    answers the namespace's 404)."""
    is_ns = attrs.rt.group == "" and attrs.rt.plural == "namespaces"
    if not attrs.namespace and not is_ns:
        return True  # cluster-scoped: never exempted by a namespaceSelector
    selector = hook.spec.get("namespaceSelector")
    if not selector:
        return True
    if is_ns and not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
        return selector_matches(selector, _labels(obj))
    labels = namespace_labels(attrs.namespace)
    if labels is None:
        return None
    return selector_matches(selector, labels)
