"""Make the Pod corpus of the memory benchmark from a real control plane.

Creates ``--deployments`` Deployments of varied, realistic templates (1-3 containers of
different images, resources, env, ports, probes, configMap/secret/emptyDir volumes, several
labels and annotations) in ``--namespaces`` namespaces named ``<prefix>corpus-<i>``, waits
until kube-controller-manager has made their ReplicaSets and Pods, saves the Pods exactly as
the API server returned them (``kubectl get --raw /api/v1/namespaces/<ns>/pods``: the LIST
items, byte for byte, without the kind and apiVersion kubectl's ``-o json`` would add and
with the server's field order), merged into one PodList, as xz-compressed JSON, and deletes
the namespaces.

So every default in the corpus is the real one: managedFields written by
kube-controller-manager, ownerReferences to the ReplicaSet, the pod-template-hash label, the
projected service-account token volume, the default tolerations, dnsPolicy,
terminationMessagePath and the rest. There is no scheduler and no kubelet on the machine it
was made on, so every Pod is Pending, unscheduled (no nodeName, no status conditions).

    .venv/bin/python -m benchmarks.make_pod_corpus --kubeconfig /tmp/realk8s/kubeconfig-admin

Deterministic (``--seed``): the same arguments make the same templates; names, uids,
resourceVersions and timestamps are the server's.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
CORPUS = DATA / "pods.json.xz"

IMAGES = [
    ("nginx", "docker.io/library/nginx:1.25.3", [80]),
    ("redis", "docker.io/library/redis:7.2.4-alpine", [6379]),
    ("postgres", "docker.io/library/postgres:16.1", [5432]),
    ("api", "ghcr.io/acme/orders-api:v2.14.1", [8080, 9090]),
    ("worker", "registry.example.com/platform/queue-worker:2024.11.3", [9102]),
    ("web", "us-docker.pkg.dev/acme-prod/frontend/web:sha-4f1c9e2", [3000]),
    ("grpc", "quay.io/acme/inventory-grpc:1.8.0", [50051, 9090]),
    ("java", "eclipse-temurin:21-jre", [8080, 8081]),
]
SIDECARS = [
    ("envoy", "docker.io/envoyproxy/envoy:v1.28.0", [15001, 15090]),
    ("fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:2.2.0", [2020]),
    ("oauth2-proxy", "quay.io/oauth2-proxy/oauth2-proxy:v7.5.1", [4180]),
    ("cloud-sql-proxy", "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.8.1", [9801]),
    ("node-exporter", "quay.io/prometheus/node-exporter:v1.7.0", [9100]),
]
TEAMS = ["payments", "search", "checkout", "identity", "platform", "data", "growth", "ml"]
ENVS = ["prod", "staging", "canary"]


def _container(rng: random.Random, spec: tuple[str, str, list[int]], app: str,
               main: bool) -> dict[str, Any]:
    name, image, ports = spec
    cpu = rng.choice(["50m", "100m", "250m", "500m", "1"])
    mem = rng.choice(["64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi"])
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "ports": [{"name": f"p{p}"[:15], "containerPort": p, "protocol": "TCP"} for p in ports],
        "resources": {"requests": {"cpu": cpu, "memory": mem},
                      "limits": {"memory": mem} if rng.random() < 0.6
                      else {"cpu": cpu, "memory": mem}},
        "env": [
            {"name": "APP_NAME", "value": app},
            {"name": "LOG_LEVEL", "value": rng.choice(["info", "debug", "warn"])},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
    }
    if main:
        c["env"] += [
            {"name": "DATABASE_URL",
             "valueFrom": {"secretKeyRef": {"name": f"{app}-db", "key": "url"}}},
            {"name": "FEATURE_FLAGS",
             "valueFrom": {"configMapKeyRef": {"name": f"{app}-config", "key": "flags"}}},
            {"name": "GOMAXPROCS",
             "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1"}}},
        ][: rng.randint(1, 3)]
        c["envFrom"] = [{"configMapRef": {"name": f"{app}-env"}}] if rng.random() < 0.5 else []
        if not c["envFrom"]:
            del c["envFrom"]
        port = ports[0]
        probe = ({"httpGet": {"path": rng.choice(["/healthz", "/ready", "/-/healthy"]),
                              "port": port}}
                 if rng.random() < 0.7 else {"tcpSocket": {"port": port}})
        c["readinessProbe"] = {**probe, "periodSeconds": rng.choice([5, 10]),
                               "failureThreshold": 3}
        if rng.random() < 0.8:
            c["livenessProbe"] = {**probe, "initialDelaySeconds": rng.choice([10, 30, 60]),
                                  "periodSeconds": 20, "timeoutSeconds": 2}
        c["volumeMounts"] = [{"name": "config", "mountPath": "/etc/app", "readOnly": True},
                             {"name": "tmp", "mountPath": "/tmp"}]
        if rng.random() < 0.4:
            c["volumeMounts"].append({"name": "tls", "mountPath": "/etc/tls",
                                      "readOnly": True})
        if rng.random() < 0.5:
            c["args"] = ["--config=/etc/app/config.yaml", f"--port={port}",
                         "--metrics-addr=:9090"]
        c["securityContext"] = {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": rng.random() < 0.5,
                                "capabilities": {"drop": ["ALL"]}}
    return c


def deployment(i: int, namespace: str, rng: random.Random) -> dict[str, Any]:
    """One Deployment of a varied, realistic template (deterministic in ``rng``)."""
    main = IMAGES[i % len(IMAGES)]
    team = rng.choice(TEAMS)
    app = f"{team}-{main[0]}-{i:03d}"
    env = rng.choice(ENVS)
    containers = [_container(rng, main, app, True)]
    for side in rng.sample(SIDECARS, rng.choice([0, 0, 1, 1, 2])):
        containers.append(_container(rng, side, app, False))
    labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": team,
              "app.kubernetes.io/version": f"{rng.randint(1, 5)}.{rng.randint(0, 30)}.0",
              "team": team, "environment": env}
    if rng.random() < 0.5:
        labels["app.kubernetes.io/component"] = rng.choice(["backend", "frontend", "worker"])
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                   "kubectl.kubernetes.io/default-container": main[0]}
    if rng.random() < 0.5:
        annotations["checksum/config"] = f"{rng.getrandbits(256):064x}"
    if rng.random() < 0.3:
        annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = "true"
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        {"name": "tls", "secret": {"secretName": f"{app}-tls"}},
    ]
    pod_spec: dict[str, Any] = {"containers": containers, "volumes": volumes,
                                "terminationGracePeriodSeconds": rng.choice([30, 60])}
    if rng.random() < 0.5:
        pod_spec["nodeSelector"] = {"kubernetes.io/os": "linux",
                                    "node.kubernetes.io/pool": rng.choice(["general", "mem"])}
    if rng.random() < 0.4:
        pod_spec["affinity"] = {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}}}}]}}
    if rng.random() < 0.3:
        pod_spec["tolerations"] = [{"key": "dedicated", "operator": "Equal",
                                    "value": team, "effect": "NoSchedule"}]
    if rng.random() < 0.3:
        pod_spec["initContainers"] = [{
            "name": "migrate", "image": main[1], "command": ["/bin/sh", "-c"],
            "args": ["./migrate up"], "resources": {"requests": {"cpu": "50m",
                                                                 "memory": "64Mi"}}}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": rng.choice([1, 2, 3, 3, 5, 6, 8, 10]),
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
            "template": {"metadata": {"labels": labels, "annotations": annotations},
                         "spec": pod_spec},
        },
    }


def _kubectl(kubeconfig: str, *args: str, data: str | None = None) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], input=data,
                          capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _pods(kubeconfig: str, namespaces: list[str]) -> list[dict[str, Any]]:
    """Every Pod of the namespaces as the API server's LIST returned it."""
    pods: list[dict[str, Any]] = []
    for ns in namespaces:
        pods += json.loads(_kubectl(kubeconfig, "get", "--raw",
                                    f"/api/v1/namespaces/{ns}/pods"))["items"]
    return pods


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kubeconfig", default="/tmp/realk8s/kubeconfig-admin")
    p.add_argument("--prefix", default="podmem-")
    p.add_argument("--namespaces", type=int, default=6)
    p.add_argument("--deployments", type=int, default=300)
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--out", type=Path, default=CORPUS)
    p.add_argument("--keep", action="store_true", help="do not delete the namespaces")
    p.add_argument("--reuse", action="store_true",
                   help="the namespaces and Deployments exist already (a --keep run)")
    a = p.parse_args(argv)
    rng = random.Random(a.seed)
    names = [f"{a.prefix}corpus-{n}" for n in range(a.namespaces)]
    try:
        want = 0
        for n, ns in enumerate(names):
            items = [deployment(i, ns, rng) for i in range(a.deployments)
                     if i % a.namespaces == n]
            want += sum(d["spec"]["replicas"] for d in items)
            if a.reuse:
                continue
            _kubectl(a.kubeconfig, "create", "namespace", ns)
            _kubectl(a.kubeconfig, "create", "-f", "-",
                     data=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        print(f"# {a.deployments} Deployments created, waiting for {want} Pods",
              file=sys.stderr)
        deadline = time.monotonic() + a.timeout
        pods: list[dict[str, Any]] = []
        while True:
            pods = _pods(a.kubeconfig, names)
            print(f"# {len(pods)} of {want} Pods", file=sys.stderr)
            if len(pods) >= want or time.monotonic() > deadline:
                break
            time.sleep(10)
        if len(pods) < want:
            raise SystemExit(f"only {len(pods)} of {want} Pods after {a.timeout:.0f} s")
        time.sleep(5)  # let the last Pods get their managedFields settled, then read again
        pods = _pods(a.kubeconfig, names)
        raw = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                          "items": pods}, separators=(",", ":")).encode()
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        print(f"# {len(pods)} Pods, {len(raw):,} bytes of JSON, "
              f"{a.out.stat().st_size:,} compressed: {a.out}", file=sys.stderr)
    finally:
        if not a.keep:
            for ns in names:
                try:
                    _kubectl(a.kubeconfig, "delete", "namespace", ns, "--wait=false",
                             "--ignore-not-found")
                except RuntimeError as exc:
                    print(f"# {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
