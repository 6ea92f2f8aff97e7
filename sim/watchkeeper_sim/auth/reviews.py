"""The review APIs: SelfSubjectReview ("kubectl auth whoami"), SelfSubjectAccessReview
("kubectl auth can-i"), SelfSubjectRulesReview ("can-i --list"), SubjectAccessReview and
LocalSubjectAccessReview.

None of them is stored: each POST is answered from the caller's identity and the simulator's
own authorizer, in the shapes kube-apiserver 1.28 sends (files 132, 133), so a client that
checks its rights before acting can be tested against the same RBAC that governs its requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from watchkeeper_sim import status as _status
from watchkeeper_sim.auth.rbac import MASTERS, Attributes, Decision, PolicyRule, Rbac, User
from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage import fields as _fields
from watchkeeper_sim.storage.resources import AUTHN_GROUP, AUTHZ_GROUP
from watchkeeper_sim.storage.store import StoreError
from watchkeeper_sim.wire import http as _http
from watchkeeper_sim.wire.http import Route

USER_INFO = web.RequestKey("wk_user_info", User)
# ResourceAttributes / NonResourceAttributes fields, in the order the apiserver encodes them
RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
NON_RESOURCE_FIELDS = ("path", "verb")


def _attributes(raw: Any, fields: tuple[str, ...]) -> JSON | None:
    """The attributes as decoded into the typed struct: known string fields only, empty
    ones dropped (omitempty), in struct order."""
    if not isinstance(raw, dict):
        return None
    return {f: raw[f] for f in fields if isinstance(raw.get(f), str) and raw[f]}


def _invalid(kind: str, field: str, value: Any, message: str) -> StoreError:
    shown = "null" if value is None else str(value)
    return StoreError(_status.invalid(kind, AUTHZ_GROUP, "", [_status.cause(
        "FieldValueInvalid", f'Invalid value: "{shown}": {message}', field)]))


def access_spec(kind: str, spec: JSON) -> tuple[JSON | None, JSON | None]:
    """(resourceAttributes, nonResourceAttributes), exactly one set, as validation demands."""
    res = _attributes(spec.get("resourceAttributes"), RESOURCE_FIELDS)
    non = _attributes(spec.get("nonResourceAttributes"), NON_RESOURCE_FIELDS)
    if res is not None and non is not None:
        raise _invalid(kind, "spec.nonResourceAttributes", non,
                       "cannot be specified in combination with resourceAttributes")
    if res is None and non is None:
        raise _invalid(kind, "spec.resourceAttributes", None,
                       "exactly one of nonResourceAttributes or resourceAttributes must be "
                       "specified")
    return res, non


def to_attributes(user: User, res: JSON | None, non: JSON | None) -> Attributes:
    if res is not None:
        return Attributes(user=user, verb=res.get("verb", ""), api_group=res.get("group", ""),
                          resource=res.get("resource", ""),
                          subresource=res.get("subresource", ""),
                          namespace=res.get("namespace", ""), name=res.get("name", ""))
    assert non is not None
    return Attributes(user=user, verb=non.get("verb", ""), path=non.get("path", ""))


def access_status(decision: Decision) -> JSON:
    """SubjectAccessReviewStatus: ``allowed`` always; ``reason`` only when there is one."""
    out: JSON = {"allowed": decision.allowed}
    if decision.reason:
        out["reason"] = decision.reason
    return out


def user_info(user: User) -> JSON:
    """authentication/v1 UserInfo as the apiserver encodes it (empty fields left out)."""
    out: JSON = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    return out


def _rule_json(rule: PolicyRule) -> tuple[str, JSON]:
    if rule.non_resource_urls:
        return "nonResourceRules", {"verbs": list(rule.verbs),
                                    "nonResourceURLs": list(rule.non_resource_urls)}
    out: JSON = {"verbs": list(rule.verbs), "apiGroups": list(rule.api_groups),
                 "resources": list(rule.resources)}
    if rule.resource_names:
        out["resourceNames"] = list(rule.resource_names)
    return "resourceRules", out


class Reviews:
    """Handlers for the review resources (registered as Handlers.subresources)."""

    def __init__(self, rbac: Rbac, read_body: Callable[[web.Request], Any],
                 now: Callable[[], str]) -> None:
        self.rbac = rbac
        self.read_body = read_body
        self.now = now

    def register(self, table: dict[tuple[str, str, str], Any]) -> None:
        table[(AUTHN_GROUP, "selfsubjectreviews", "")] = self.self_subject_review
        table[(AUTHZ_GROUP, "selfsubjectaccessreviews", "")] = self.self_subject_access_review
        table[(AUTHZ_GROUP, "selfsubjectrulesreviews", "")] = self.self_subject_rules_review
        table[(AUTHZ_GROUP, "subjectaccessreviews", "")] = self.subject_access_review
        table[(AUTHZ_GROUP, "localsubjectaccessreviews", "")] = self.local_access_review

    async def _spec(self, request: web.Request, verb: str, kind: str) -> JSON:
        if verb != "create":
            raise StoreError(_status.method_not_allowed())
        raw = await self.read_body(request)
        body = _http.decode_write_body(request, raw, kind)
        spec = body.get("spec") if isinstance(body, dict) else None
        return spec if isinstance(spec, dict) else {}

    def _created(self, request: web.Request, kind: str, group: str, spec: JSON,
                 status: JSON, namespace: str = "") -> web.Response:
        """201 with the echoed spec; metadata as the generic create path leaves it
        (creationTimestamp null, one Update managedFields entry for the spec: 132)."""
        meta: JSON = {"creationTimestamp": None}
        if namespace:
            meta = {"namespace": namespace, **meta}
        if spec:
            meta["managedFields"] = [{
                "manager": request.get(_http.MANAGER) or "unknown", "operation": "Update",
                "apiVersion": f"{group}/v1", "time": self.now(), "fieldsType": "FieldsV1",
                "fieldsV1": _fields.encode(_fields.leaves({"spec": spec}), dots=True,
                                           custom=False)}]
        return _http.json_response({"kind": kind, "apiVersion": f"{group}/v1",
                                    "metadata": meta, "spec": spec, "status": status}, 201)

    async def self_subject_review(self, request: web.Request, route: Route, namespace: str,
                                  verb: str) -> web.StreamResponse:
        """``kubectl auth whoami``: who the request authenticated (or impersonated) as (133)."""
        await self._spec(request, verb, "SelfSubjectReview")
        return _http.json_response({
            "kind": "SelfSubjectReview", "apiVersion": f"{AUTHN_GROUP}/v1",
            "metadata": {"creationTimestamp": self.now()},
            "status": {"userInfo": user_info(request[USER_INFO])},
        }, 201)

    async def self_subject_access_review(self, request: web.Request, route: Route,
                                         namespace: str, verb: str) -> web.StreamResponse:
        """``kubectl auth can-i``: the caller's own question, answered by the authorizer
        (132: allowed false, no reason, for a user without grants)."""
        kind = "SelfSubjectAccessReview"
        spec = await self._spec(request, verb, kind)
        res, non = access_spec(kind, spec)
        decision = self.rbac.authorize(to_attributes(request[USER_INFO], res, non))
        echoed = {"resourceAttributes": res} if res is not None else {
            "nonResourceAttributes": non}
        return self._created(request, kind, AUTHZ_GROUP, echoed, access_status(decision))

    async def subject_access_review(self, request: web.Request, route: Route, namespace: str,
                                    verb: str) -> web.StreamResponse:
        return await self._access_review(request, verb, "SubjectAccessReview", "")

    async def local_access_review(self, request: web.Request, route: Route, namespace: str,
                                  verb: str) -> web.StreamResponse:
        return await self._access_review(request, verb, "LocalSubjectAccessReview", namespace)

    async def _access_review(self, request: web.Request, verb: str, kind: str,
                             namespace: str) -> web.StreamResponse:
        """Someone else's question: user/groups from the spec (at least one required); a
        LocalSubjectAccessReview's namespace must match its resourceAttributes'."""
        spec = await self._spec(request, verb, kind)
        res, non = access_spec(kind, spec)
        user_name = spec.get("user") if isinstance(spec.get("user"), str) else ""
        groups = tuple(g for g in spec.get("groups") or () if isinstance(g, str))
        if not user_name and not groups:
            raise _invalid(kind, "spec.user", "",
                           "at least one of user or group must be specified")
        if namespace and (non is not None or (res or {}).get("namespace", "") != namespace):
            raise _invalid(kind, "spec.resourceAttributes.namespace",
                           (res or {}).get("namespace", ""), "must match metadata.namespace")
        uid = spec.get("uid") if isinstance(spec.get("uid"), str) else ""
        subject = User(user_name or "", groups, None, uid or "")
        decision = self.rbac.authorize(to_attributes(subject, res, non))
        echoed: JSON = {"resourceAttributes": res} if res is not None else {
            "nonResourceAttributes": non}
        for key, value in (("user", user_name), ("groups", list(groups)), ("uid", uid)):
            if value:
                echoed[key] = value
        return self._created(request, kind, AUTHZ_GROUP, echoed, access_status(decision),
                             namespace)

    async def self_subject_rules_review(self, request: web.Request, route: Route,
                                        namespace: str, verb: str) -> web.StreamResponse:
        """``kubectl auth can-i --list``: every rule that applies to the caller in
        ``spec.namespace`` (system:masters: everything, from the privileged-group rule)."""
        kind = "SelfSubjectRulesReview"
        spec = await self._spec(request, verb, kind)
        raw_ns = spec.get("namespace")
        ns = raw_ns if isinstance(raw_ns, str) else ""
        user = request[USER_INFO]
        status: JSON = {"resourceRules": [], "nonResourceRules": [], "incomplete": False}
        if MASTERS in user.groups:
            status["resourceRules"].append({"verbs": ["*"], "apiGroups": ["*"],
                                            "resources": ["*"]})
            status["nonResourceRules"].append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        rules, errors = self.rbac.rules_for(user, ns)
        for rule in rules:
            key, entry = _rule_json(rule)
            status[key].append(entry)
        if errors:
            status["evaluationError"] = "; ".join(errors)
            status["incomplete"] = True
        return self._created(request, kind, AUTHZ_GROUP, {"namespace": ns} if ns else {},
                             status)
