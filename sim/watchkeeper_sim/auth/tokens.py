"""Service-account tokens: the TokenRequest API (``serviceaccounts/{name}/token``) and the
authenticator that accepts what it issued.

Behaves like kube-apiserver 1.28's TokenREST and its service-account JWT validator, so that a
test can mint a token for a ServiceAccount (as ``kubectl create token`` does) and act as
``system:serviceaccount:{ns}:{name}``: the token is JWT-shaped with the real claims but an
unverifiable signature, is refused (401) after its expiry (with the validator's one-minute
leeway), when its audiences miss the server's, or once the ServiceAccount is gone or
recreated. Only a SHA-256 digest of each token is kept, so no token can leak from here into a
repr, a log line or the request log.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.auth.rbac import User
from watchkeeper_sim.documents.table import parse_time
from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage.registry import iso
from watchkeeper_sim.storage.store import ObjectStore, StoreError

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
KIND = "TokenRequest"
ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_AUDIENCES = (ISSUER,)  # --api-audiences defaults to the issuer
DEFAULT_EXPIRATION = 3600  # SetDefaults_TokenRequestSpec
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
LEEWAY = 60.0  # go-jose's jwt.DefaultLeeway, used by the apiserver's token validator


def username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def sa_user(namespace: str, name: str) -> User:
    """The identity a service-account token authenticates as (no token kept on it)."""
    return User(username(namespace, name), ("system:serviceaccounts",
                                            f"system:serviceaccounts:{namespace}",
                                            "system:authenticated"))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass(frozen=True)
class _Issued:
    """What one token stands for (the token itself is only the key's preimage)."""

    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    not_before: float
    expires: float


def _invalid(name: str, field: str, value: Any, message: str) -> StoreError:
    shown = json.dumps(value) if isinstance(value, str) else value
    return StoreError(_status.invalid(KIND, GROUP, name, [_status.cause(
        "FieldValueInvalid", f"Invalid value: {shown}: {message}", field)]))


def _decode_error(message: str) -> StoreError:
    return StoreError(_status.bad_request(
        f'{KIND} in version "v1" cannot be handled as a {KIND}: {message}'))


def _check_kind(body: Any) -> JSON:
    """The body as a TokenRequest (kind and apiVersion may be left out, as for any create)."""
    if not isinstance(body, dict):
        raise StoreError(_status.bad_request(
            f"the object provided is unrecognized (must be of type {KIND}): couldn't get "
            "version/kind; json parse error: expected an object"))
    kind = body.get("kind") or KIND
    api_version = body.get("apiVersion") or API_VERSION
    if (kind, api_version) != (KIND, API_VERSION):
        version = str(api_version).split("/")[-1]
        raise StoreError(_status.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {KIND}: converting '
            f"({version}.{kind}) to (authentication.{KIND}): unknown conversion"))
    return body


def _spec(body: JSON) -> tuple[JSON, tuple[str, ...] | None, int]:
    """(spec as sent, audiences or None, expirationSeconds defaulted); 400 for wrong types."""
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequest.spec of "
                            "type v1.TokenRequestSpec")
    auds = spec.get("audiences")
    if auds is not None and not (isinstance(auds, list)
                                 and all(isinstance(a, str) for a in auds)):
        raise _decode_error("json: cannot unmarshal into Go struct field "
                            "TokenRequestSpec.spec.audiences of type []string")
    exp = spec.get("expirationSeconds")
    if exp is not None and (isinstance(exp, bool) or not isinstance(exp, int)):
        raise _decode_error("json: cannot unmarshal into Go struct field "
                            "TokenRequestSpec.spec.expirationSeconds of type int64")
    return spec, tuple(auds) if auds else None, DEFAULT_EXPIRATION if exp is None else exp


class ServiceAccountTokens:
    """Issues TokenRequests for the ServiceAccounts in a store and authenticates their tokens."""

    def __init__(
        self,
        store: ObjectStore,
        wall_clock: Callable[[], float] = time.time,
        audiences: tuple[str, ...] = DEFAULT_AUDIENCES,
    ) -> None:
        self.store = store
        self.wall_clock = wall_clock
        self.audiences = audiences  # the server's own (--api-audiences)
        self._issued: dict[str, _Issued] = {}  # sha256(token) -> what it stands for
        self._kid = _b64(secrets.token_bytes(32))

    def __repr__(self) -> str:
        return f"<ServiceAccountTokens issued={len(self._issued)}>"

    def _service_account(self, namespace: str, name: str) -> JSON | None:
        rt = self.store.lookup("", "v1", "serviceaccounts")
        return self.store.peek(rt, namespace, name) if rt is not None else None

    # ---- TokenRequest ----------------------------------------------------------------------

    def request(self, namespace: str, name: str, body: Any) -> JSON:
        """TokenREST.Create: the TokenRequest to answer with 201, or a StoreError (400 for a
        body that is no TokenRequest, 422 for invalid fields, 404 for a missing account)."""
        req = _check_kind(body)
        meta = req.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("name") and meta["name"] != name:
            raise _invalid(name, "metadata.name", meta["name"],
                           "must match the service account name if specified")
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise _invalid(name, "metadata.namespace", meta["namespace"],
                           "must match the service account namespace if specified")
        spec, audiences, seconds = _spec(req)
        sa = self._service_account(namespace, name)
        if sa is None:
            raise StoreError(_status.not_found("serviceaccounts", "", name))
        if seconds < MIN_EXPIRATION:
            raise _invalid("", "spec.expirationSeconds", seconds,
                           "may not specify a duration less than 10 minutes")
        if seconds > MAX_EXPIRATION:
            raise _invalid("", "spec.expirationSeconds", seconds,
                           "may not specify a duration larger than 2^32 seconds")
        now = math.floor(self.wall_clock())  # JWT times are whole seconds
        auds = audiences or self.audiences
        uid = str((sa.get("metadata") or {}).get("uid", ""))
        token = self._mint(namespace, name, uid, auds, now, now + seconds)
        self._prune(now)
        self._issued[_digest(token)] = _Issued(namespace, name, uid, auds, now, now + seconds)
        return {
            "kind": KIND,
            "apiVersion": API_VERSION,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": iso(now)},
            "spec": {"audiences": list(auds), "expirationSeconds": seconds,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token, "expirationTimestamp": iso(now + seconds)},
        }

    def _mint(self, namespace: str, name: str, uid: str, audiences: tuple[str, ...],
              now: int, expires: int) -> str:
        """A JWT with the claims a real service-account token carries, so clients that peek
        into tokens (e.g. for ``exp``) see what they would see; the signature is random."""
        header = {"alg": "RS256", "kid": self._kid}
        claims = {
            "aud": list(audiences), "exp": expires, "iat": now, "iss": ISSUER,
            "kubernetes.io": {"namespace": namespace,
                              "serviceaccount": {"name": name, "uid": uid}},
            "nbf": now, "sub": username(namespace, name),
        }
        parts = (json.dumps(header, separators=(",", ":")).encode(),
                 json.dumps(claims, separators=(",", ":")).encode(), secrets.token_bytes(256))
        return ".".join(_b64(p) for p in parts)

    def _prune(self, now: float) -> None:
        for key in [k for k, v in self._issued.items() if now - LEEWAY > v.expires]:
            del self._issued[key]

    # ---- authentication --------------------------------------------------------------------

    def authenticate(self, token: str) -> User | None:
        """The service account a token stands for; None (401) for a token not issued here,
        expired, meant for other audiences, or whose ServiceAccount was deleted or replaced."""
        if token.count(".") != 2:
            return None
        issued = self._issued.get(_digest(token))
        if issued is None:
            return None
        now = self.wall_clock()
        if now - LEEWAY > issued.expires or now + LEEWAY < issued.not_before:
            return None
        if not set(issued.audiences) & set(self.audiences):
            return None
        sa = self._service_account(issued.namespace, issued.name)
        meta = (sa or {}).get("metadata") or {}
        if sa is None or str(meta.get("uid", "")) != issued.uid:
            return None
        deleted = parse_time(meta.get("deletionTimestamp"))
        if deleted is not None and deleted.timestamp() < now - LEEWAY:
            return None
        return sa_user(issued.namespace, issued.name)
