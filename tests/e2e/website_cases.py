"""The Website scenario (examples/website.py), shared by the real-cluster test
(test_typed_crd.py, through kubectl) and the simulator's (tests/runtime/typed): objects the
CRD generated from the class must default and reject exactly as the class declares.

Each expected answer is kube-apiserver 1.28.7's, a 422 cause written as kubectl prints it,
``field: message``. ``sim_gap`` names what the simulator does not do yet for that case
(its test expects the failure, strictly, so the mark goes once the simulator learns it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
IMAGE_PATTERN = r"^[a-z0-9]([-a-z0-9._/]*[a-z0-9])?(:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?$"
# the real server adds this cause when a schema error keeps it from running the CEL rules
CEL_SKIPPED = ('<nil>: Invalid value: "null": some validation rules were not checked because '
               "the object was invalid; correct the existing errors to complete validation")

DEFAULTED = {"image": "nginx:1.25", "labels": {}, "maxUnavailable": "25%", "memory": "128Mi",
             "minReplicas": 1, "ports": [], "replicas": 1, "tier": "standard"}


@dataclass(frozen=True)
class Case:
    name: str
    """The object's name (and the test's id)."""
    spec: dict[str, Any]
    causes: list[str] | None = None
    """The 422's causes; None: created."""
    stored: dict[str, Any] | None = None
    """The spec the server stores (defaults filled) when created."""
    sim_gap: tuple[str, ...] = field(default=())


CASES = [
    Case("defaults", {"image": "nginx:1.25"}, stored=DEFAULTED),
    Case("explicit",
         {"image": "registry.example.com/team/site:2.0", "replicas": 3, "minReplicas": 2,
          "tier": "premium", "labels": {"app": "site"}, "ports": [{"name": "http", "port": 80}],
          "maxUnavailable": 1, "memory": "1Gi", "domain": "site.example.com"},
         # the port's protocol is defaulted inside the list item
         stored={"image": "registry.example.com/team/site:2.0", "replicas": 3,
                 "minReplicas": 2, "tier": "premium", "labels": {"app": "site"},
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
                 "maxUnavailable": 1, "memory": "1Gi", "domain": "site.example.com"}),
    Case("too-many", {"image": "nginx:1", "replicas": 11}, [
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal "
        "to 10"]),
    Case("too-few", {"replicas": 0}, [
        "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal "
        "to 1",
        "spec.image: Required value",
        CEL_SKIPPED]),
    # kube-openapi checks an object's required fields after walking its properties: the
    # port's before the spec's
    Case("port-zero", {"ports": [{"port": 0}]}, [
        "spec.ports[0].port: Invalid value: 0: spec.ports[0].port in body should be greater "
        "than or equal to 1",
        "spec.ports[0].name: Required value",
        "spec.image: Required value",
        CEL_SKIPPED]),
    Case("min-above", {"image": "nginx:1", "replicas": 2, "minReplicas": 3}, [
        'spec.minReplicas: Invalid value: "object": minReplicas must not exceed replicas']),
    Case("latest", {"image": "nginx:latest"}, [
        "spec.image: Invalid value: \"string\": pin a version: the tag ':latest' is not "
        "allowed"]),
    Case("bad-image", {"image": "Bad Image"}, [
        f"spec.image: Invalid value: \"Bad Image\": spec.image in body should match "
        f"'{IMAGE_PATTERN}'"]),
    Case("gold", {"image": "nginx:1", "tier": "gold"}, [
        'spec.tier: Unsupported value: "gold": supported values: "free", "standard", '
        '"premium"']),
    Case("dup-port", {"image": "nginx:1", "ports": [{"name": "http", "port": 80},
                                                    {"name": "http", "port": 81}]}, [
        'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"http"}']),
    Case("bad-port-name", {"image": "nginx:1", "ports": [{"name": "HTTP", "port": 80}]}, [
        "spec.ports[0].name: Invalid value: \"HTTP\": spec.ports[0].name in body should match "
        "'^[a-z]([-a-z0-9]*[a-z0-9])?$'"]),
    Case("no-port-number", {"image": "nginx:1", "ports": [{"name": "http"}]}, [
        "spec.ports[0].port: Required value", CEL_SKIPPED]),
    Case("nine-ports", {"image": "nginx:1",
                        "ports": [{"name": f"p{i}", "port": 80 + i} for i in range(9)]}, [
        "spec.ports: Too many: 9: must have at most 8 items", CEL_SKIPPED]),
    Case("bad-memory", {"image": "nginx:1", "memory": "12 GB"}, [
        f"spec.memory: Invalid value: \"12 GB\": spec.memory in body should match "
        f"'{QUANTITY_PATTERN}'"]),
    Case("bool-surge", {"image": "nginx:1", "maxUnavailable": True}, [
        'spec.maxUnavailable: Invalid value: "boolean": spec.maxUnavailable in body must be of '
        'type integer,string: "boolean"', CEL_SKIPPED]),
    Case("int-label", {"image": "nginx:1", "labels": {"a": 1}}, [
        'spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: '
        '"integer"', CEL_SKIPPED]),
]

DOMAIN_IMMUTABLE = 'spec.domain: Invalid value: "string": domain is immutable'
"""The transition rule's cause when an update changes spec.domain."""


def website(group: str, case: Case, namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Website",
            "metadata": {"name": case.name, "namespace": namespace}, "spec": case.spec}


def causes_of(details: dict[str, Any]) -> list[str]:
    """A 422 Status's causes as kubectl prints them."""
    return [f"{c.get('field')}: {c.get('message')}" for c in details.get("causes") or ()]
