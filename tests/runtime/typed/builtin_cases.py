"""Objects of the built-in kinds watchkeeper has classes for (``wk.k8s``), as a user writes
them, for the tests on the simulator and on a real API server: what the server returns must
read into the class and come back unchanged (every field it sends is declared)."""

from __future__ import annotations

from typing import Any

import msgspec

import watchkeeper as wk

LABELS = {"app": "typed"}


def pod_spec() -> dict[str, Any]:
    return {"containers": [{
        "name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80, "name": "http"}],
        "env": [{"name": "MODE", "value": "x"}],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 101}}],
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 5}


def manifests() -> list[tuple[type[wk.k8s.Kind], dict[str, Any]]]:
    meta = {"name": "typed", "labels": LABELS, "annotations": {"note": "builtin"}}
    template = {"metadata": {"labels": LABELS}, "spec": {**pod_spec(), "restartPolicy": "Always"}}
    return [
        (wk.k8s.ConfigMap, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                            "data": {"a": "1"}, "binaryData": {"b": "AAEC"}}),
        (wk.k8s.Secret, {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
                         "type": "Opaque", "data": {"password": "c2VjcmV0"}}),
        (wk.k8s.Pod, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec()}),
        (wk.k8s.Service, {"apiVersion": "v1", "kind": "Service", "metadata": meta,
                          "spec": {"selector": LABELS, "ports": [
                              {"name": "http", "port": 80, "targetPort": "http"}]}}),
        (wk.k8s.Deployment, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                             "spec": {"replicas": 2, "selector": {"matchLabels": LABELS},
                                      "strategy": {"rollingUpdate": {"maxSurge": "50%",
                                                                     "maxUnavailable": 0}},
                                      "template": template}}),
        (wk.k8s.Job, {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                      "spec": {"backoffLimit": 1, "template": {"spec": pod_spec()}}}),
    ]


def without_nulls(value: Any) -> Any:
    """``null`` is absent: Kubernetes writes ``creationTimestamp: null`` in templates."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def declared(cls: type[wk.k8s.Kind], obj: dict[str, Any]) -> Any:
    """``obj`` through the class alone (no source kept): what the class declares of it."""
    return msgspec.to_builtins(msgspec.convert(obj, cls))
