"""Users, bearer tokens and RBAC, changeable while the server runs.

Two sources of permissions, either of which may allow a request: rules granted from Python
straight to a user or group name (``Rbac.grant``), and the Role, RoleBinding, ClusterRole and
ClusterRoleBinding objects stored through the API, evaluated like kube-apiserver's RBAC
authorizer on every request. Decisions and the 403 wording match the real authorizer
(files 076-080, 056) so clients can be tested against permission changes. Besides members of
system:masters, nobody is allowed anything the stored objects do not grant: discovery and
/version are open only through the default ClusterRoles the server stores at start
(_bootstrap.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.status import JSON
from watchkeeper_sim.storage.store import ObjectStore

ANONYMOUS = "system:anonymous"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    uid: str = ""


@dataclass(frozen=True)
class Rule:
    """Allows ``verbs`` on ``resources`` (``"widgets/status"`` for a subresource) in ``groups``,
    in the listed ``namespaces`` (None = everywhere, including the cluster scope)."""

    verbs: tuple[str, ...]
    resources: tuple[str, ...]
    groups: tuple[str, ...] = ("",)
    namespaces: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None

    def allows(self, a: Attributes) -> bool:
        if not ("*" in self.verbs or a.verb in self.verbs):
            return False
        if not ("*" in self.groups or a.api_group in self.groups):
            return False
        full = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        if not any(r in ("*", full) or (r.endswith("/*") and not a.subresource
                                         and r[:-2] == a.resource)
                   or (r.startswith("*/") and a.subresource == r[2:])
                   for r in self.resources):
            return False
        if self.namespaces is not None and a.namespace not in self.namespaces:
            return False
        return self.names is None or a.name in self.names


@dataclass(frozen=True)
class Attributes:
    """What a request wants to do, in the authorizer's terms."""

    user: User
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # set for non-resource requests (/version, /api, ...)

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


def _tuple(values: Iterable[str] | str) -> tuple[str, ...]:
    return (values,) if isinstance(values, str) else tuple(values)


# ---- RBAC from API objects (rbac.authorization.k8s.io/v1) ---------------------------------

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_PLURALS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
SA_PREFIX = "system:serviceaccount:"


def _strings(value: Any) -> tuple[str, ...]:
    """A list-of-strings field of a stored object; anything else counts as empty, since the
    simulator stores RBAC objects without the apiserver's validation."""
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _meta(obj: JSON, key: str) -> str:
    return _text(_object(obj.get("metadata")).get(key))


def _matches(values: tuple[str, ...], wanted: str) -> bool:
    return "*" in values or wanted in values


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a Role or ClusterRole, matched like rbac/v1's VerbMatches, APIGroupMatches,
    ResourceMatches, ResourceNameMatches and NonResourceURLMatches."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> PolicyRule:
        rule = _object(raw)
        return cls(
            verbs=_strings(rule.get("verbs")),
            api_groups=_strings(rule.get("apiGroups")),
            resources=_strings(rule.get("resources")),
            resource_names=_strings(rule.get("resourceNames")),
            non_resource_urls=_strings(rule.get("nonResourceURLs")),
        )

    def allows(self, a: Attributes) -> bool:
        if not _matches(self.verbs, a.verb):
            return False
        if not a.is_resource:
            return any(u == "*" or u == a.path
                       or (u.endswith("*") and a.path.startswith(u.rstrip("*")))
                       for u in self.non_resource_urls)
        return (_matches(self.api_groups, a.api_group) and self._resource_matches(a)
                and (not self.resource_names or a.name in self.resource_names))

    def _resource_matches(self, a: Attributes) -> bool:
        # Unlike ``Rule``, "pods/*" means nothing special here: the real helper knows only
        # "*", an exact "resource[/subresource]" and "*/subresource".
        full = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return any(r in ("*", full) or (bool(a.subresource) and r == f"*/{a.subresource}")
                   for r in self.resources)


def _rules(obj: JSON) -> tuple[PolicyRule, ...]:
    raw = obj.get("rules")
    return tuple(PolicyRule.parse(r) for r in raw) if isinstance(raw, list) else ()


@dataclass(frozen=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def applies_to(self, user: User, binding_namespace: str) -> bool:
        """appliesToUser: a ServiceAccount subject without a namespace means one in the
        binding's namespace (so never anything, in a ClusterRoleBinding)."""
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            ns = self.namespace or binding_namespace
            return bool(ns) and user.name == f"{SA_PREFIX}{ns}:{self.name}"
        return False

    def describe(self, binding_namespace: str) -> str:
        """describeSubject: a ServiceAccount is shown as "name/namespace"."""
        if self.kind == "ServiceAccount":
            return f'{self.kind} "{self.name}/{self.namespace or binding_namespace}"'
        return f'{self.kind} "{self.name}"'


@dataclass(frozen=True)
class Binding:
    """A RoleBinding (``namespace`` set) or ClusterRoleBinding, reduced to what authorizes."""

    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]
    name: str = ""

    @classmethod
    def parse(cls, obj: JSON) -> Binding:
        ref = _object(obj.get("roleRef"))
        raw = obj.get("subjects")
        subjects = tuple(Subject(_text(s.get("kind")), _text(s.get("name")),
                                 _text(s.get("namespace")))
                         for s in (raw if isinstance(raw, list) else ()) if isinstance(s, dict))
        return cls(_meta(obj, "namespace"), _text(ref.get("kind")), _text(ref.get("name")),
                   subjects, _meta(obj, "name"))

    def subject_for(self, user: User) -> Subject | None:
        """The first subject naming ``user`` (appliesTo), None when none does."""
        return next((s for s in self.subjects if s.applies_to(user, self.namespace)), None)

    def applies_to(self, user: User) -> bool:
        return self.subject_for(user) is not None

    def describe(self, subject: Subject) -> str:
        """The source named in an allow reason, as the real binding describers print it."""
        if self.namespace:
            return (f'RoleBinding "{self.name}/{self.namespace}" of {self.role_kind} '
                    f'"{self.role_name}" to {subject.describe(self.namespace)}')
        return (f'ClusterRoleBinding "{self.name}" of {self.role_kind} "{self.role_name}" '
                f'to {subject.describe("")}')


@dataclass(frozen=True)
class PolicySnapshot:
    """The RBAC objects of one store state, parsed once and shared by every request until the
    next write (so a request never copies the objects)."""

    cluster_bindings: tuple[Binding, ...] = ()
    bindings: dict[str, tuple[Binding, ...]] = field(default_factory=dict)  # by namespace
    roles: dict[tuple[str, str], tuple[PolicyRule, ...]] = field(default_factory=dict)
    cluster_roles: dict[str, tuple[PolicyRule, ...]] = field(default_factory=dict)

    def role_rules(self, binding: Binding) -> tuple[PolicyRule, ...] | str:
        """GetRoleReferenceRules: the rules, or the error text the authorizer collects."""
        if binding.role_kind == "Role":
            rules = self.roles.get((binding.namespace, binding.role_name))
            what = "role"
        elif binding.role_kind == "ClusterRole":
            rules = self.cluster_roles.get(binding.role_name)
            what = "clusterrole"
        else:
            return f'unsupported role reference kind: "{binding.role_kind}"'
        if rules is None:
            return f'{what}.{RBAC_GROUP} "{binding.role_name}" not found'
        return rules

    def visit(self, user: User, namespace: str
              ) -> Iterator[tuple[str, tuple[PolicyRule, ...] | str]]:
        """VisitRulesFor: ClusterRoleBindings, then (for a namespaced request) the
        RoleBindings of that namespace, yielding (source, rules) for each that applies to
        ``user``; the source is the binding as an allow reason names it."""
        for binding in (*self.cluster_bindings,
                        *(self.bindings.get(namespace, ()) if namespace else ())):
            subject = binding.subject_for(user)
            if subject is not None:
                yield binding.describe(subject), self.role_rules(binding)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    # allowed: "RBAC: allowed by ..." (what a SubjectAccessReview reports); denied: "RBAC: ..."
    # resolution errors, appended to a 403's message
    reason: str = ""


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one error as is, several deduplicated in []."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _selector_matches(selector: Any, labels: dict[str, Any]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions) against an object's labels; an
    empty selector matches everything, as in the aggregation controller."""
    sel = _object(selector)
    if any(labels.get(k) != v for k, v in _object(sel.get("matchLabels")).items()):
        return False
    for expr in sel.get("matchExpressions") or ():
        e = _object(expr)
        key, op, values = _text(e.get("key")), _text(e.get("operator")), _strings(e.get("values"))
        present = key in labels
        if (op == "In" and not (present and labels[key] in values)) \
                or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _aggregated(objs: list[JSON]) -> dict[str, tuple[PolicyRule, ...]]:
    """ClusterRole rules by name, with aggregated roles (``aggregationRule``: admin, edit,
    view and any a user makes) holding the union of the roles their selectors pick, as the
    clusterrole-aggregation controller keeps them; worked out here on every policy change,
    so a role labelled ``rbac.authorization.k8s.io/aggregate-to-view`` extends view at once."""
    by_name = {_meta(o, "name"): o for o in objs}
    done: dict[str, tuple[PolicyRule, ...]] = {}

    def rules_of(name: str, seen: frozenset[str]) -> tuple[PolicyRule, ...]:
        if name in done:
            return done[name]
        obj = by_name[name]
        agg = obj.get("aggregationRule")
        if not isinstance(agg, dict):
            done[name] = _rules(obj)
            return done[name]
        selectors = agg.get("clusterRoleSelectors")
        union: dict[PolicyRule, None] = {}
        for other in sorted(by_name):
            labels = _object(_object(by_name[other].get("metadata")).get("labels"))
            if other in seen or other == name or not any(
                    _selector_matches(s, labels) for s in (selectors or ())):
                continue
            union.update(dict.fromkeys(rules_of(other, seen | {name})))
        done[name] = tuple(union)
        return done[name]

    return {name: rules_of(name, frozenset()) for name in by_name}


class PolicyObjects:
    """The authorizer's view of the RBAC objects in a store, re-read after every write."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._snapshot = PolicySnapshot()
        self._seen: tuple[int, ...] | None = None

    def snapshot(self) -> PolicySnapshot:
        # Every write to an RBAC resource moves its changed_at (and clear() counts), so an
        # unchanged tuple means unchanged RBAC objects: other writes and all reads never
        # re-parse anything.
        changed = self.store.changed_at
        seen = (*(changed.get((RBAC_GROUP, p), 0) for p in RBAC_PLURALS), self.store.clears)
        if seen != self._seen:
            self._snapshot = self._read()
            self._seen = seen
        return self._snapshot

    def _objects(self, plural: str) -> list[JSON]:
        rt = self.store.lookup(RBAC_GROUP, "v1", plural)
        return self.store.objects(rt) if rt is not None else []

    def _read(self) -> PolicySnapshot:
        bindings: dict[str, list[Binding]] = {}
        for obj in self._objects("rolebindings"):
            b = Binding.parse(obj)
            bindings.setdefault(b.namespace, []).append(b)
        return PolicySnapshot(
            cluster_bindings=tuple(Binding.parse(o) for o in self._objects("clusterrolebindings")),
            bindings={ns: tuple(bs) for ns, bs in bindings.items()},
            roles={(_meta(o, "namespace"), _meta(o, "name")): _rules(o)
                   for o in self._objects("roles")},
            cluster_roles=_aggregated(self._objects("clusterroles")),
        )

    def authorize(self, a: Attributes) -> Decision:
        """RBACAuthorizer.Authorize: allowed by the first matching rule; otherwise denied with
        the resolution errors met on the way (e.g. a binding to a missing Role)."""
        errors: list[str] = []
        for source, rules in self.snapshot().visit(a.user, a.namespace):
            if isinstance(rules, str):
                errors.append(rules)
            elif any(rule.allows(a) for rule in rules):
                return Decision(True, f"RBAC: allowed by {source}")
        return Decision(False, f"RBAC: {_aggregate(errors)}" if errors else "")

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], list[str]]:
        """RulesFor (what a SelfSubjectRulesReview lists): every rule that applies to
        ``user`` in ``namespace``, and the resolution errors met."""
        rules: list[PolicyRule] = []
        errors: list[str] = []
        for _, found in self.snapshot().visit(user, namespace):
            if isinstance(found, str):
                errors.append(found)
            else:
                rules.extend(found)
        return rules, errors


class Rbac:
    """Who is who (tokens) and who may do what (Python rules, then ``objects``)."""

    def __init__(self, objects: PolicyObjects | None = None) -> None:
        self.objects = objects  # RBAC objects stored through the API, if any
        self.users: dict[str, User] = {}
        self._tokens: dict[str, str] = {}
        self._rules: dict[str, list[Rule]] = {}
        self.add_user("admin", groups=(MASTERS,))
        self.add_user("limited")

    # ---- users -----------------------------------------------------------------------------

    def add_user(self, name: str, token: str | None = None, groups: Iterable[str] = ()) -> str:
        """Create or replace a user; returns its bearer token (random unless given)."""
        old = self.users.get(name)
        if old is not None and old.token:
            self._tokens.pop(old.token, None)
        token = token or f"{name}-{secrets.token_hex(12)}"
        all_groups = tuple(dict.fromkeys([*groups, AUTHENTICATED]))
        # a static token file names a uid for every user; the reference pack's are
        # "<name>-uid" (133)
        self.users[name] = User(name, all_groups, token, f"{name}-uid")
        self._tokens[token] = name
        return token

    def token(self, name: str) -> str:
        user = self.users[name]
        assert user.token is not None
        return user.token

    def authenticate(self, token: str) -> User | None:
        name = self._tokens.get(token)
        return self.users.get(name) if name else None

    @staticmethod
    def anonymous() -> User:
        return User(ANONYMOUS, (UNAUTHENTICATED,))

    # ---- rules -----------------------------------------------------------------------------

    def grant(
        self,
        subject: str,
        verbs: Iterable[str] | str = ("*",),
        resources: Iterable[str] | str = ("*",),
        groups: Iterable[str] | str = ("",),
        namespaces: Iterable[str] | str | None = None,
        names: Iterable[str] | str | None = None,
    ) -> Rule:
        """Allow a user (or every member of a group) something; returns the rule added."""
        rule = Rule(
            verbs=_tuple(verbs),
            resources=_tuple(resources),
            groups=_tuple(groups),
            namespaces=None if namespaces is None else _tuple(namespaces),
            names=None if names is None else _tuple(names),
        )
        self._rules.setdefault(subject, []).append(rule)
        return rule

    def revoke(
        self,
        subject: str,
        rule: Rule | None = None,
        *,
        verbs: Iterable[str] | str | None = None,
        resources: Iterable[str] | str | None = None,
    ) -> None:
        """Remove one rule, or every rule of the subject naming any of ``verbs``/``resources``."""
        rules = self._rules.get(subject, [])
        if rule is not None:
            self._rules[subject] = [r for r in rules if r != rule]
            return
        vs = None if verbs is None else set(_tuple(verbs))
        rs = None if resources is None else set(_tuple(resources))
        self._rules[subject] = [
            r for r in rules
            if not ((vs is None or vs & set(r.verbs)) and (rs is None or rs & set(r.resources)))
        ]

    def revoke_all(self, subject: str) -> None:
        self._rules.pop(subject, None)

    def rules(self, subject: str) -> list[Rule]:
        return list(self._rules.get(subject, []))

    # ---- decisions -------------------------------------------------------------------------

    def authorize(self, a: Attributes) -> Decision:
        """system:masters (the apiserver's privileged-group authorizer), Python grants, then
        the RBAC objects. Discovery and /version are open only through the bootstrap
        ClusterRoles stored at start (system:discovery, system:public-info-viewer), as on a
        cluster."""
        if MASTERS in a.user.groups:
            return Decision(True)
        for subject in (a.user.name, *a.user.groups):
            for rule in self._rules.get(subject, []):
                if a.is_resource and rule.allows(a):
                    return Decision(True)
        return self.objects.authorize(a) if self.objects is not None else Decision(False)

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], list[str]]:
        """Every rule that applies to ``user`` in ``namespace`` (Python grants first), and
        the RBAC resolution errors met: what a SelfSubjectRulesReview reports."""
        rules = [PolicyRule(verbs=r.verbs, api_groups=r.groups, resources=r.resources,
                            resource_names=r.names or ())
                 for subject in (user.name, *user.groups) for r in self._rules.get(subject, [])
                 if r.namespaces is None or namespace in r.namespaces]
        if self.objects is None:
            return rules, []
        found, errors = self.objects.rules_for(user, namespace)
        return rules + found, errors

    def allowed(self, a: Attributes) -> bool:
        return self.authorize(a).allowed

    @staticmethod
    def forbidden(a: Attributes, reason: str = "") -> JSON:
        """The 403 Status the real authorizer's denial produces; a non-empty ``reason`` (the
        authorizer's, e.g. a missing Role) follows the message after ": ", as in
        ForbiddenStatusError."""
        suffix = f": {reason}" if reason else ""
        if not a.is_resource:
            return _status.forbidden(
                f'forbidden: User "{a.user.name}" cannot {a.verb} path "{a.path}"{suffix}', {})
        what = _status.qualified(a.resource, a.api_group)
        if a.name:
            what += f' "{a.name}"'
        full = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
        details: JSON = {}
        if a.name:
            details["name"] = a.name
        if a.api_group:
            details["group"] = a.api_group
        details["kind"] = a.resource
        return _status.forbidden(
            f'{what} is forbidden: User "{a.user.name}" cannot {a.verb} resource "{full}" in '
            f'API group "{a.api_group}" {scope}{suffix}',
            details,
        )
