"""User impersonation (``kubectl --as``/``--as-group``): the Impersonate-* request headers.

Like kube-apiserver's impersonation filter, which runs after authentication and before
priority-and-fairness and authorization: every header is checked as the ``impersonate`` verb
(on users, groups, serviceaccounts, userextras or uids) for the authenticated caller, and the
request then proceeds as the impersonated user, whose groups come from the headers only (130,
131). Extra fields are authorized but not kept on the user (nothing here reads them).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from multidict import CIMultiDictProxy

from watchkeeper_sim.auth.rbac import (
    ANONYMOUS,
    AUTHENTICATED,
    SA_PREFIX,
    UNAUTHENTICATED,
    Attributes,
    User,
)

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHN_GROUP = "authentication.k8s.io"


@dataclass(frozen=True)
class Impersonation:
    """The user a request acts as, and the impersonate checks its caller must pass."""

    user: User
    checks: tuple[Attributes, ...]


class ImpersonationError(ValueError):
    """Impersonate-Group/-Uid/-Extra without Impersonate-User: the apiserver's 400, whose
    message prints the requests as Go prints a []v1.ObjectReference."""


def _reference(kind: str, name: str, api_version: str = "", field_path: str = "") -> str:
    # v1.ObjectReference{Kind, Namespace, Name, UID, APIVersion, ResourceVersion, FieldPath}
    return "{" + " ".join((kind, "", name, "", api_version, "", field_path)) + "}"


def requested(headers: CIMultiDictProxy[str]) -> bool:
    return any(k.lower().startswith("impersonate-") for k in headers)


def impersonation(headers: CIMultiDictProxy[str], actor: User) -> Impersonation:
    """Who ``actor`` asks to act as; raises ImpersonationError for groups, uid or extras
    without a user."""
    name = headers.get(USER_HEADER, "")
    groups = tuple(headers.getall(GROUP_HEADER, []))
    uid = headers.get(UID_HEADER, "")
    extra: dict[str, tuple[str, ...]] = {}
    for key in {k.lower() for k in headers}:
        if key.startswith(EXTRA_PREFIX):
            extra[unquote(key[len(EXTRA_PREFIX):])] = tuple(headers.getall(key))
    if not name:
        refs = [_reference("Group", g) for g in groups]
        refs += [_reference("UserExtra", v, f"{AUTHN_GROUP}/v1", k)
                 for k, values in extra.items() for v in values]
        if uid:
            refs.append(_reference("UID", uid, f"{AUTHN_GROUP}/v1"))
        raise ImpersonationError(f"requested [{' '.join(refs)}] without impersonating a user")
    checks: list[Attributes] = []
    resulting = list(groups)
    if name.startswith(SA_PREFIX) and name.count(":") == 3:
        namespace, sa = name[len(SA_PREFIX):].split(":")
        checks.append(Attributes(actor, "impersonate", resource="serviceaccounts",
                                 namespace=namespace, name=sa))
        if not groups:
            resulting = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        checks.append(Attributes(actor, "impersonate", resource="users", name=name))
    checks.extend(Attributes(actor, "impersonate", resource="groups", name=g) for g in groups)
    for key, values in sorted(extra.items()):
        checks.extend(Attributes(actor, "impersonate", api_group=AUTHN_GROUP,
                                 resource="userextras", subresource=key, name=v)
                      for v in values)
    if uid:
        checks.append(Attributes(actor, "impersonate", api_group=AUTHN_GROUP, resource="uids",
                                 name=uid))
    # system:authenticated is added unless a group already says (un)authenticated
    marker = UNAUTHENTICATED if name == ANONYMOUS else AUTHENTICATED
    if not {AUTHENTICATED, UNAUTHENTICATED} & set(resulting):
        resulting.append(marker)
    return Impersonation(User(name, tuple(resulting), None, uid), tuple(checks))
