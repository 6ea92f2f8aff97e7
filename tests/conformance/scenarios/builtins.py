"""Defaulting and validation of built-in kinds: ConfigMap/Secret immutability, Service,
Deployment, StatefulSet, Job, CronJob, Pod, PVC; quantities and int32 fields; object
names, optimistic concurrency and a watch of one object's life.

Workload controllers of a cluster act on what these scenarios create (a Deployment gets its
ReplicaSet and a status): the scenarios record the answers to their own writes, which come
before any controller, and read back only what no controller writes."""

from __future__ import annotations

from typing import Any

from conformance.steps import (
    Scenario,
    Watch,
    apply,
    delete,
    get,
    kubectl,
    ns_path,
    patch,
    post,
    put,
)

CM = ns_path("configmaps")
SECRETS = ns_path("secrets")
SVC = ns_path("services")
DEPLOY = ns_path("deployments", group="apps")
STS = ns_path("statefulsets", group="apps")
JOBS = ns_path("jobs", group="batch")
CRONJOBS = ns_path("cronjobs", group="batch")
PODS = ns_path("pods")
PVC = ns_path("persistentvolumeclaims")
IMAGE = "registry.example/app:1"


def meta(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def pod_template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "app", "image": IMAGE}], **spec}}


def deployment(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name),
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod_template(),
                     **spec}}


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name),
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}], **spec}}


def job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name),
            "spec": {"suspend": True, "template": {
                "spec": {"containers": [{"name": "app", "image": IMAGE}],
                         "restartPolicy": "Never"}}, **spec}}


def cronjob(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(name),
            "spec": {"schedule": schedule, "suspend": True, "jobTemplate": {"spec": {
                "template": {"spec": {"containers": [{"name": "app", "image": IMAGE}],
                                      "restartPolicy": "OnFailure"}}}}, **spec}}


def with_resources(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    return deployment(name, replicas=0, template={
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "app", "image": IMAGE, "resources": resources}]}})


SCENARIOS = [
    Scenario("configmap-immutable", "builtins", (
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("frozen"),
                  "data": {"a": "1"}, "immutable": True}),
        patch(f"{CM}/frozen", {"data": {"a": "2"}}),
        patch(f"{CM}/frozen", {"binaryData": {"b": "AA=="}}),
        patch(f"{CM}/frozen", {"immutable": False}),
        patch(f"{CM}/frozen", {"metadata": {"labels": {"x": "y"}}}),
        get(f"{CM}/frozen"),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("both"),
                  "data": {"a": "1"}, "binaryData": {"a": "AA=="}}),
        # one bad key per ConfigMap: a cluster lists one object's key errors in map order
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("slash"),
                  "data": {"bad/key": "1"}}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("dots"),
                  "data": {"..": "2"}}),
        kubectl("get", "configmap", "frozen"),
    )),
    Scenario("secret-data", "builtins", (
        post(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta("s"),
                       "data": {"a": "YQ=="}, "stringData": {"b": "bee", "a": "over"}}),
        post(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta("bad64"),
                       "data": {"a": "not base64!"}}),
        post(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta("tls"),
                       "type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}}),
        patch(f"{SECRETS}/s", {"type": "Other"}),
        post(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta("frozen"),
                       "immutable": True, "stringData": {"a": "1"}}),
        patch(f"{SECRETS}/frozen", {"stringData": {"a": "2"}}),
        kubectl("get", "secrets", "--field-selector", "type=Opaque"),
    )),
    Scenario("service-defaults", "builtins", (
        post(SVC, service("plain"), pick=("spec",)),
        post(SVC, service("named", ports=[{"name": "web", "port": 80, "targetPort": "http"},
                                          {"name": "dns", "port": 53, "protocol": "UDP"}]),
             pick=("spec",)),
        post(SVC, service("headless", clusterIP="None"), pick=("spec",)),
        post(SVC, service("nodeport", type="NodePort"), pick=("spec",)),
        post(SVC, service("external", type="ExternalName", externalName="example.com",
                          ports=None), pick=("spec",)),
    )),
    Scenario("service-validation", "builtins", (
        post(SVC, service("range", ports=[{"port": 70000}])),
        post(SVC, service("dupes", ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}])),
        post(SVC, service("unnamed", ports=[{"port": 80}, {"port": 81}])),
        post(SVC, service("type", type="Sideways")),
        post(SVC, service("noports", ports=[])),
        post(SVC, service("Bad_Name")),
    ), differs="Service specs are not validated (port ranges, port names, type)"),
    Scenario("deployment-defaults", "builtins", (
        post(DEPLOY, deployment("d")),
    ), differs="no defaults for Deployment specs and pod templates (strategy, "
       "revisionHistoryLimit, progressDeadlineSeconds, restartPolicy, "
       "dnsPolicy, imagePullPolicy, terminationMessagePath...)"),
    Scenario("deployment-validation", "builtins", (
        post(DEPLOY, deployment("mismatch", selector={"matchLabels": {"app": "y"}})),
        post(DEPLOY, deployment("noselector", selector=None)),
        post(DEPLOY, deployment("negative", replicas=-1, revisionHistoryLimit=-2)),
        post(DEPLOY, deployment("badcontainer", template={
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "Bad_Name"}], "restartPolicy": "Never"}})),
        post(DEPLOY, deployment("strategy", strategy={
            "type": "Recreate", "rollingUpdate": {"maxSurge": 1}})),
        post(DEPLOY, deployment("surge", strategy={
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})),
    ), differs="Deployment specs are not validated (selector against the template's "
       "labels, replicas, container names, strategy)"),
    Scenario("int32-fields", "builtins", (
        post(DEPLOY, deployment("big", replicas=2147483648)),
        post(DEPLOY, deployment("float", replicas=1.5)),
        post(DEPLOY, deployment("max", replicas=0, revisionHistoryLimit=2147483647),
             pick=("spec.revisionHistoryLimit",)),
    )),
    Scenario("statefulset-defaults", "builtins", (
        post(STS, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("s"),
                   "spec": {"replicas": 0, "serviceName": "s",
                            "selector": {"matchLabels": {"app": "x"}},
                            "template": pod_template(),
                            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        post(STS, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("bad"),
                   "spec": {"selector": {"matchLabels": {"app": "x"}},
                            "template": pod_template(restartPolicy="Never"),
                            "podManagementPolicy": "Random"}}),
    ), differs="no defaults or validation for StatefulSet specs (podManagementPolicy, "
       "updateStrategy, volumeClaimTemplates, restartPolicy)"),
    Scenario("job-defaults", "builtins", (
        post(JOBS, job("j")),
        post(JOBS, job("indexed", completions=3, completionMode="Indexed", parallelism=2),
             pick=("spec",)),
        post(JOBS, job("always", template={"spec": {
            "containers": [{"name": "app", "image": IMAGE}], "restartPolicy": "Always"}})),
        post(JOBS, job("limits", backoffLimit=-1, completions=-1, parallelism=-1)),
        patch(f"{JOBS}/j", {"spec": {"completions": 5}}),
    ), differs="no defaults or validation for Job specs (backoffLimit, completions, "
       "the generated selector and labels, restartPolicy, immutable "
       "completions)"),
    Scenario("cronjob-defaults", "builtins", (
        post(CRONJOBS, cronjob("c", "*/5 * * * *")),
        post(CRONJOBS, cronjob("bad", "every five minutes")),
        post(CRONJOBS, cronjob("tz", "0 * * * *", timeZone="Mars/Olympus")),
        post(CRONJOBS, cronjob("tzspec", "TZ=UTC 0 * * * *")),
        post(CRONJOBS, cronjob("policy", "@hourly", concurrencyPolicy="Sometimes",
                               startingDeadlineSeconds=-1)),
    ), differs="no defaults or validation for CronJob specs (schedule, timeZone, "
       "concurrencyPolicy, history limits)"),
    Scenario("pod-defaults", "builtins", (
        apply(f"{ns_path('serviceaccounts')}/default", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("default")},
            "setup", record=False),
        post(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta("p"),
                    "spec": {"containers": [{"name": "app", "image": IMAGE}]}}),
        post(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta("bad"),
                    "spec": {"containers": [{"name": "app"}], "restartPolicy": "Sometimes"}}),
        patch(f"{PODS}/p", {"spec": {"containers": [{"name": "app", "image": IMAGE,
                                                     "args": ["x"]}]}}, "strategic"),
    ), differs="no Pod defaults, admission (the service account's token volume, "
       "tolerations, priority) or validation"),
    Scenario("pvc-defaults", "builtins", (
        post(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("c"),
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        post(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": meta("bad"), "spec": {"resources": {}}}),
        patch(f"{PVC}/c", {"spec": {"accessModes": ["ReadWriteMany"]}}),
    ), differs="PersistentVolumeClaims are not served"),
    Scenario("quantities", "builtins", (
        post(DEPLOY, with_resources("canonical", {
            "requests": {"cpu": "1000m", "memory": "1024Mi"},
            "limits": {"cpu": "1.5", "memory": "2e9", "ephemeral-storage": "0.5Gi"}}),
             pick=("spec.template.spec.containers.*.resources",)),
        post(DEPLOY, with_resources("garbage", {"requests": {"cpu": "1 core"}})),
        post(DEPLOY, with_resources("over", {"requests": {"cpu": "2"},
                                            "limits": {"cpu": "1"}})),
        post(DEPLOY, with_resources("negative", {"requests": {"memory": "-1Mi"}})),
        post(DEPLOY, with_resources("unknown", {"requests": {"gpu": "1"}})),
    ), differs="resource quantities are neither canonicalized (1000m is 1, 1024Mi is "
       "1Gi) nor validated"),
    Scenario("object-names", "builtins", (
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("UPPER")}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("x" * 254)}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"generateName": "gen-"}}, name="gen"),
        get(f"{CM}/{{name:gen}}", pick=("metadata.name", "metadata.generateName")),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"generateName": "Bad_"}}),
        # one bad label or annotation per object: a cluster checks a map in map order
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": meta("label-key", labels={"a/b/c": "x"})}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": meta("label-value", labels={"ok": "y" * 64})}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": meta("annotation-key", annotations={"Bad Key": "v"})}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": meta("elsewhere", namespace="default")}),
    )),
    Scenario("optimistic-concurrency", "builtins", (
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c"),
                  "data": {"a": "1"}}, name="v1"),
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c")}),
        put(f"{CM}/c", {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": meta("c", resourceVersion="{rv:v1}"), "data": {"a": "2"}}),
        put(f"{CM}/c", {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": meta("c", resourceVersion="{rv:v1}"), "data": {"a": "3"}}),
        put(f"{CM}/c", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c"),
                        "data": {"a": "4"}}),
        put(f"{CM}/c", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("other"),
                        "data": {"a": "5"}}),
        put(f"{CM}/missing", {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": meta("missing")}),
        patch(f"{CM}/c", {"metadata": {"resourceVersion": "{rv:v1}"}, "data": {"a": "6"}}),
    )),
    Scenario("configmap-watch", "builtins", (
        post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": meta("w", labels={"watched": "yes"}), "data": {"a": "1"}},
             name="w"),
        put(f"{CM}/w", {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": meta("w", labels={"watched": "yes"}), "data": {"a": "1"}}),
        patch(f"{CM}/w", {"data": {"a": "2"}}),
        patch(f"{CM}/w", {"metadata": {"labels": {"watched": "no"}}}),
        patch(f"{CM}/w", {"metadata": {"labels": {"watched": "yes"}}}),
        delete(f"{CM}/w"),
        Watch(CM, since="w", count=4, query={"labelSelector": "watched=yes"}),
        Watch(CM, since="w", count=4, query={"fieldSelector": "metadata.name=w"}),
    )),
]
