"""Users, bearer tokens and RBAC-like rules, changeable while the server runs.

Deliberately smaller than Kubernetes RBAC: rules are granted straight to a user or group name
(no Role/Binding objects), but decisions and the 403 wording match the real authorizer
(files 076-080, 056) so clients can be tested against permission changes.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from watchkeeper.testing import _status
from watchkeeper.testing._status import JSON

ANONYMOUS = "system:anonymous"
MASTERS = "system:masters"
# Non-resource paths every caller may read (system:public-info-viewer) ...
PUBLIC_PATHS = ("/version", "/healthz", "/readyz", "/livez")
# ... and those every authenticated user may read (system:discovery, system:basic-user).
DISCOVERY_PATHS = ("/api", "/apis", "/openapi", "/version", "/healthz", "/readyz", "/livez")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)


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


class Rbac:
    """Who is who (tokens) and who may do what (rules)."""

    def __init__(self) -> None:
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
        all_groups = tuple(dict.fromkeys([*groups, "system:authenticated"]))
        self.users[name] = User(name, all_groups, token)
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
        return User(ANONYMOUS, ("system:unauthenticated",))

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

    def allowed(self, a: Attributes) -> bool:
        if MASTERS in a.user.groups:
            return True
        if not a.is_resource:
            public = PUBLIC_PATHS if a.user.name == ANONYMOUS else DISCOVERY_PATHS
            if any(a.path == p or a.path.startswith(p + "/") for p in public):
                return True
        for subject in (a.user.name, *a.user.groups):
            for rule in self._rules.get(subject, []):
                if a.is_resource and rule.allows(a):
                    return True
        return False

    @staticmethod
    def forbidden(a: Attributes) -> JSON:
        """The 403 Status the real authorizer's denial produces."""
        if not a.is_resource:
            return _status.forbidden(
                f'forbidden: User "{a.user.name}" cannot {a.verb} path "{a.path}"', {})
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
            f'API group "{a.api_group}" {scope}',
            details,
        )
