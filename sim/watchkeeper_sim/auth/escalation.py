"""RBAC escalation prevention: nobody grants through a Role or binding what they do not hold.

kube-apiserver's RBAC storage (pkg/registry/rbac/*/policybased) refuses a write of a Role or
ClusterRole whose rules the writer does not already hold (``ConfirmNoEscalation``: every
rule broken down to one verb, group, resource and resourceName or one nonResourceURL, each
covered by one rule the writer has), unless the writer is in system:masters or has the
``escalate`` verb on that roles/clusterroles resource; and a write of a RoleBinding or
ClusterRoleBinding unless the writer holds the rules of the role it references or has
``bind`` on that role. Setting or changing a ClusterRole's aggregationRule needs ``*`` on
everything. Without this check a user allowed only to create RoleBindings could bind
herself to cluster-admin, so the simulator would be no security boundary to test against.

The caller of a write is taken from ``REQUEST_USER`` (set by the HTTP layer for the request
being served); writes made from Python (no request) are not checked, as the simulator's
direct object access bypasses RBAC altogether.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.auth.rbac import (
    MASTERS,
    RBAC_GROUP,
    Attributes,
    PolicyRule,
    Rbac,
    User,
    _aggregate,
    _rules,
)
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage.store import StoreError

# The authenticated (or impersonated) user of the API request being served, if any.
REQUEST_USER: ContextVar[User | None] = ContextVar("watchkeeper_sim_request_user", default=None)

ROLE_PLURALS = ("roles", "clusterroles")
BINDING_PLURALS = ("rolebindings", "clusterrolebindings")
FULL_AUTHORITY = (
    PolicyRule(verbs=("*",), api_groups=("*",), resources=("*",)),
    PolicyRule(verbs=("*",), non_resource_urls=("*",)),
)
# Fields a garbage collector changes while an object goes away: a write touching only these
# is never an escalation (rbacregistry.IsOnlyMutatingGCFields).
_GC_META = ("ownerReferences", "finalizers", "selfLink", "deletionTimestamp",
            "deletionGracePeriodSeconds", "managedFields", "resourceVersion", "generation")


def _go_quote_list(items: tuple[str, ...] | list[str]) -> str:
    """Go's %q of a []string: ``["a" "b"]``."""
    return "[" + " ".join(_status.go_quote(i) for i in items) + "]"


def _breakdown(rule: PolicyRule) -> list[PolicyRule]:
    """breakdownRule: one rule per (group, resource, verb[, resourceName]) and per
    (nonResourceURL, verb)."""
    out: list[PolicyRule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    out.extend(PolicyRule(verbs=(verb,), api_groups=(group,),
                                          resources=(resource,), resource_names=(name,))
                               for name in rule.resource_names)
                else:
                    out.append(PolicyRule(verbs=(verb,), api_groups=(group,),
                                          resources=(resource,)))
    for url in rule.non_resource_urls:
        out.extend(PolicyRule(verbs=(verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return out


def _url_covers(owner: str, sub: str) -> bool:
    return owner == sub or (owner.endswith("*") and sub.startswith(owner.rstrip("*")))


def _rule_covers(owner: PolicyRule, sub: PolicyRule) -> bool:
    """ruleCovers (component-helpers/auth/rbac/validation): ``sub`` has at most one of each."""
    def has_all(have: tuple[str, ...], want: tuple[str, ...], wildcard: str = "*") -> bool:
        return wildcard in have or set(want) <= set(have)

    if sub.resource_names:
        names = not owner.resource_names or set(sub.resource_names) <= set(owner.resource_names)
    else:
        names = not owner.resource_names
    urls = all(any(_url_covers(o, u) for o in owner.non_resource_urls)
               for u in sub.non_resource_urls)
    return (has_all(owner.verbs, sub.verbs) and has_all(owner.api_groups, sub.api_groups)
            and has_all(owner.resources, sub.resources) and names and urls)


def covers(owner: list[PolicyRule], servant: tuple[PolicyRule, ...]) -> list[PolicyRule]:
    """Covers: the broken-down servant rules no owner rule covers (empty = covered)."""
    return [sub for rule in servant for sub in _breakdown(rule)
            if not any(_rule_covers(o, sub) for o in owner)]


def _compact(rules: list[PolicyRule]) -> list[PolicyRule]:
    """CompactRules: rules with one group and one resource and nothing else are merged by
    (group, resource), their verbs appended in order."""
    simple: dict[tuple[str, str], list[str]] = {}
    out: list[PolicyRule] = []
    for r in rules:
        if not r.resource_names and not r.non_resource_urls and len(r.api_groups) == 1 \
                and len(r.resources) == 1:
            simple.setdefault((r.api_groups[0], r.resources[0]), []).extend(r.verbs)
        else:
            out.append(r)
    out.extend(PolicyRule(verbs=tuple(v), api_groups=(g,), resources=(res,))
               for (g, res), v in simple.items())
    return out


def compact_string(r: PolicyRule) -> str:
    """rbacv1helpers.CompactString: ``{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}``."""
    parts = [f"{label}:{_go_quote_list(values)}" for label, values in (
        ("APIGroups", r.api_groups), ("Resources", r.resources),
        ("NonResourceURLs", r.non_resource_urls), ("ResourceNames", r.resource_names),
        ("Verbs", r.verbs)) if values]
    return "{" + ", ".join(parts) + "}"


def _registry_wording(error: str) -> str:
    """The registry-backed resolver names a missing role by its plural resource
    ("roles.rbac..."), the authorizer's listers by the singular one ("role.rbac...")."""
    for singular in ("role", "clusterrole"):
        prefix = f"{singular}.{RBAC_GROUP} "
        if error.startswith(prefix):
            return f"{singular}s.{RBAC_GROUP} " + error[len(prefix):]
    return error


def _forbidden(plural: str, name: str, message: str) -> StoreError:
    """errors.NewForbidden(rbac resource, name, err): a 403 from the storage layer (no
    nosniff header: that is the authorization filter's)."""
    what = f"{plural}.{RBAC_GROUP}" + (f" {_status.go_quote(name)}" if name else "")
    details: JSON = {"name": name} if name else {}
    details.update({"group": RBAC_GROUP, "kind": plural})
    return StoreError(_status.forbidden(f"{what} is forbidden: {message}", details))


def _only_gc_fields(new: JSON, old: JSON) -> bool:
    def strip(obj: JSON) -> JSON:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_META}
        return {**obj, "metadata": meta}

    return strip(new) == strip(old)


def _has_aggregation(obj: JSON | None) -> bool:
    agg = obj.get("aggregationRule") if obj is not None else None
    return isinstance(agg, dict) and bool(agg.get("clusterRoleSelectors"))


class EscalationCheck:
    """Installed as ``Registry.admit``: raises StoreError(403/404) for an escalating write."""

    def __init__(self, rbac: Rbac) -> None:
        self.rbac = rbac

    def __call__(self, rt: ResourceType, namespace: str, new: JSON, old: JSON | None) -> None:
        if rt.group != RBAC_GROUP or rt.plural not in (*ROLE_PLURALS, *BINDING_PLURALS):
            return
        user = REQUEST_USER.get()
        if user is None or MASTERS in user.groups:  # EscalationAllowed
            return
        name = str((new.get("metadata") or {}).get("name") or "")
        if rt.plural in ROLE_PLURALS:
            self._check_role(rt, user, namespace, name, new, old)
        else:
            self._check_binding(rt, user, namespace, name, new, old)

    def _allowed(self, user: User, verb: str, resource: str, namespace: str, name: str,
                 group: str = RBAC_GROUP) -> bool:
        return self.rbac.authorize(Attributes(user=user, verb=verb, api_group=group,
                                              resource=resource, namespace=namespace,
                                              name=name)).allowed

    def _check_role(self, rt: ResourceType, user: User, namespace: str, name: str,
                    new: JSON, old: JSON | None) -> None:
        # RoleEscalationAuthorized asks about the request's own name: "" on a create
        if self._allowed(user, "escalate", rt.plural, namespace, name if old else ""):
            return
        if old is not None and _only_gc_fields(new, old):
            return
        self._confirm(rt.plural, name, user, namespace, _rules(new))
        aggregates = _has_aggregation(new) or _has_aggregation(old)
        if rt.plural == "clusterroles" and aggregates \
                and self._missing(user, namespace, FULL_AUTHORITY)[0]:
            raise _forbidden(rt.plural, name,
                             "must have cluster-admin privileges to use the aggregationRule")

    def _check_binding(self, rt: ResourceType, user: User, namespace: str, name: str,
                       new: JSON, old: JSON | None) -> None:
        if old is not None and _only_gc_fields(new, old):
            return
        ref: Any = new.get("roleRef")
        ref = ref if isinstance(ref, dict) else {}
        kind, ref_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        role_plural = {"Role": "roles", "ClusterRole": "clusterroles"}.get(kind)
        if role_plural is not None and self._allowed(  # BindingAuthorized
                user, "bind", role_plural, namespace, ref_name,
                group=str(ref.get("apiGroup") or "")):
            return
        snapshot = self.rbac.objects.snapshot() if self.rbac.objects is not None else None
        rules: tuple[PolicyRule, ...] | None = None
        if kind == "Role":
            rules = snapshot.roles.get((namespace, ref_name)) if snapshot else None
        elif kind == "ClusterRole":
            rules = snapshot.cluster_roles.get(ref_name) if snapshot else None
        else:
            raise StoreError(_status.internal(
                f"unsupported role reference kind: {_status.go_quote(kind)}"))
        if rules is None:  # GetRoleReferenceRules' error, as the registry getter words it
            raise StoreError(_status.not_found(role_plural or "", RBAC_GROUP, ref_name))
        self._confirm(rt.plural, name, user, namespace, rules)

    def _missing(self, user: User, namespace: str, rules: tuple[PolicyRule, ...]
                 ) -> tuple[list[PolicyRule], list[str]]:
        owner, errors = self.rbac.rules_for(user, namespace)
        return covers(owner, rules), errors

    def _confirm(self, plural: str, name: str, user: User, namespace: str,
                 rules: tuple[PolicyRule, ...]) -> None:
        """ConfirmNoEscalation, its message word for word."""
        missing, errors = self._missing(user, namespace, rules)
        if not missing:
            return
        lines = sorted(set(compact_string(r) for r in _compact(missing)))
        msg = (f"user {_status.go_quote(user.name)} (groups={_go_quote_list(user.groups)}) is "
               f"attempting to grant RBAC permissions not currently held:\n" + "\n".join(lines))
        if errors:
            msg += f"; resolution errors: [{_aggregate([_registry_wording(e) for e in errors])}]"
        raise _forbidden(plural, name, msg)
