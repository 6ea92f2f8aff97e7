"""The manifests that register a ``WebhookServer``'s handlers with the API server: one
ValidatingWebhookConfiguration and one MutatingWebhookConfiguration (each only when it has
handlers), and the CRD of each conversion handler with its ``spec.conversion`` filled in.

``watchkeeper webhooks module:attr`` prints them. No ``caBundle``: the server's
``CertificateManager`` publishes it (``WebhookCerts(validating=..., mutating=...,
crds=...)`` must name these configurations and CRDs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from watchkeeper.typed.crd import crds
from watchkeeper.webhooks.admission import AdmissionHandler
from watchkeeper.webhooks.server import WebhookServer

__all__ = ["Endpoint", "RegistrationError", "registration_manifests"]

JSON = dict[str, Any]
API = "admissionregistration.k8s.io/v1"


class RegistrationError(ValueError):
    """The handlers cannot be registered as declared; the message names the path."""


@dataclass(frozen=True)
class Endpoint:
    """Where the API server reaches the server: a Service (in a cluster) or a ``url``
    (https://host:port, local development)."""

    service: str | None = None
    namespace: str | None = None
    port: int = 443
    url: str | None = None

    def __post_init__(self) -> None:
        if self.url is not None:
            if not self.url.startswith("https://"):
                raise RegistrationError(f"the webhook url must start with https://, not "
                                        f"{self.url!r}")
        elif not (self.service and self.namespace):
            raise RegistrationError("say where the API server reaches the webhooks: a "
                                    "Service (name and namespace) or a url")

    def client_config(self, path: str) -> JSON:
        if self.url is not None:
            return {"url": self.url.rstrip("/") + path}
        return {"service": {"name": self.service, "namespace": self.namespace,
                            "path": path, "port": self.port}}


def _slug(path: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", path.lower()).strip("-")
    return slug or "webhook"


def _resources(handler: AdmissionHandler) -> tuple[list[str], list[str], list[str]]:
    """(apiGroups, apiVersions, resources) as declared, else from the handler's model."""
    r = handler.rules
    groups, versions, resources = r.api_groups, r.api_versions, r.resources
    model = handler.model
    ident = model.identity() if model is not None and hasattr(model, "identity") else None
    if ident is not None and not resources:
        res = getattr(ident, "resource", None)  # a wk.k8s kind
        if res is not None:
            group, version, plural = res.group, res.version, res.plural
        else:  # a wk.CustomResource
            group, version, plural = ident.group, ident.version, ident.plural
        resources = (plural,)
        groups = groups if groups is not None else (group,)
        versions = versions if versions is not None else (version,)
    if not resources:
        raise RegistrationError(f"webhook {handler.path} names no resources: pass "
                                "resources=[...] (and api_groups) or a model class")
    return list(groups if groups is not None else ("*",)), list(
        versions if versions is not None else ("*",)), list(resources)


def _webhook(handler: AdmissionHandler, config_name: str, endpoint: Endpoint) -> JSON:
    r = handler.rules
    groups, versions, resources = _resources(handler)
    hook: JSON = {
        "name": r.name or f"{_slug(handler.path)}.{config_name}.watchkeeper.dev",
        "admissionReviewVersions": ["v1"],
        "clientConfig": endpoint.client_config(handler.path),
        "rules": [{"operations": list(r.operations), "apiGroups": groups,
                   "apiVersions": versions, "resources": resources, "scope": r.scope}],
        "failurePolicy": handler.failure_policy,
        "matchPolicy": r.match_policy,
        "sideEffects": r.side_effects,
        # the API server waits a second longer than the handler may run, so the handler's
        # own "timed out" answer (or its failure_policy) is what it acts on; 30 s at most
        "timeoutSeconds": max(1, min(30, math.ceil(handler.timeout) + 1)),
    }
    if r.object_selector is not None:
        hook["objectSelector"] = dict(r.object_selector)
    if r.namespace_selector is not None:
        hook["namespaceSelector"] = dict(r.namespace_selector)
    if handler.mutating:
        hook["reinvocationPolicy"] = r.reinvocation_policy
    return hook


def registration_manifests(server: WebhookServer, endpoint: Endpoint, *,
                           validating: str, mutating: str) -> list[JSON]:
    """The configurations (named ``validating`` and ``mutating``) and CRDs registering
    ``server``'s handlers."""
    out: list[JSON] = []
    for is_mutating, kind, name in ((False, "ValidatingWebhookConfiguration", validating),
                                    (True, "MutatingWebhookConfiguration", mutating)):
        hooks = [_webhook(h, name, endpoint) for h in server.admission.values()
                 if h.mutating == is_mutating]
        names = [h["name"] for h in hooks]
        if len(set(names)) != len(names):
            raise RegistrationError(f"{kind} {name}: webhook names repeat: {names}")
        if hooks:
            out.append({"apiVersion": API, "kind": kind, "metadata": {"name": name},
                        "webhooks": hooks})
    for handler in server.conversions.values():
        (crd,) = crds(*handler.versions)
        crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": endpoint.client_config(handler.path)}}
        out.append(crd)
    if not out:
        raise RegistrationError("the webhook server has no handlers")
    return out
