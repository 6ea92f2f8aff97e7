"""The typed example operator (examples/website_operator.py) on a real API server, the
scenario of tests/examples/test_website_operator.py: a Website gets its owned Deployment and
Service, the Deployment follows its replicas, a refused image is one Warning Event and no
retry, and deleting the Website removes the children.

What is real differs from the simulator in one way this test checks: the cluster's
Deployment controller reports on the Deployment, but without a kubelet (a control plane
alone, as the suite's cluster may be) no pod ever becomes available, so the Website stays
Ready False/Progressing ("0 of N replicas available"), which is the truth. On a cluster with
nodes the pods may become available: the test accepts Ready True/Available there.

The Website is installed in an API group of the run's own (``<prefix>-<random>.example.com``):
CRDs are cluster-wide and the cluster is shared."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, cast

import website_operator
from website import Website
from website_operator import FINALIZER

import watchkeeper as wk
from runtime.typed.website import in_group
from watchkeeper_sim import wait_for, wait_for_deletion

from .conftest import LABELS, PREFIX, on_simulator

PATIENCE = 60.0


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    found = wk.conditions.find_condition(obj, "Ready")
    assert found is not None  # "not yet"
    return dict(found)


def honest(replicas: int, generation: int) -> Any:
    """Ready says how many pods are available, for the generation asked about."""
    def check(obj: dict[str, Any]) -> bool:
        cond = ready(obj)
        if cond.get("observedGeneration") != generation:
            return False
        if cond["status"] == "True":
            return bool(cond["reason"] == "Available")
        return bool(cond["reason"] == "Progressing"
                    and cond["message"].endswith(f" of {replicas} replicas available"))
    return check


async def test_the_website_operator_on_a_real_cluster(
    client: wk.Client, namespace: str,
) -> None:
    group = f"{PREFIX}-{uuid.uuid4().hex[:8]}.example.com"
    site_cls = cast(type[Website], in_group(Website, group))
    crd = wk.crd(site_cls)
    crd["metadata"]["labels"] = dict(LABELS)  # what the suite made at cluster scope
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io")
    await wk.install_crds(client, crd, field_manager="e2e")
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        op = await website_operator.setup(client, namespace=namespace, resource=site_cls)
        task = asyncio.create_task(wk.run(op, stop=stop, handle_signals=False))
        sites = client.api(f"websites.{group}", namespace=namespace)
        deployments = client.api("deployments.apps", namespace=namespace)
        services = client.api("services", namespace=namespace)
        events = client.api("events.k8s.io/v1/events", namespace=namespace)

        created = await sites.create({
            "apiVersion": f"{group}/v1", "kind": "Website", "metadata": {"name": "blog"},
            "spec": {"image": "nginx:1.25", "replicas": 2,
                     "ports": [{"name": "web", "port": 8080}]}})
        dep = await wait_for(deployments, "blog", timeout=PATIENCE)
        svc = await wait_for(services, "blog", timeout=PATIENCE)
        for child in (dep, svc):
            (owner,) = child["metadata"]["ownerReferences"]
            assert owner == {"apiVersion": f"{group}/v1", "kind": "Website", "name": "blog",
                             "uid": wk.meta.uid(created), "controller": True,
                             "blockOwnerDeletion": True}
        assert dep["spec"]["replicas"] == 2
        assert svc["spec"]["ports"][0]["port"] == 8080
        assert svc["spec"]["ports"][0]["targetPort"] == "web"
        if not await on_simulator(client):  # it has no Deployment controller
            # the cluster's Deployment controller reports on it; Ready follows honestly
            await wait_for(deployments, "blog",
                           lambda d: d["status"]["observedGeneration"] >= 1, timeout=PATIENCE)
        got = await wait_for(sites, "blog", honest(2, 1), timeout=PATIENCE)
        assert got["metadata"]["finalizers"] == [FINALIZER]
        assert got["status"]["observedGeneration"] == 1
        assert got["status"]["selector"] == (
            "app.kubernetes.io/instance=blog,app.kubernetes.io/name=website")

        await sites.patch("blog", {"spec": {"replicas": 3}})
        await wait_for(deployments, "blog", lambda d: d["spec"]["replicas"] == 3,
                       timeout=PATIENCE)
        await wait_for(sites, "blog", honest(3, 2), timeout=PATIENCE)

        # A refused image: Ready False/ImageRefused, one Warning Event, no retry, no child.
        await sites.create({
            "apiVersion": f"{group}/v1", "kind": "Website", "metadata": {"name": "miner"},
            "spec": {"image": "untrusted.example.org/miner:1.0"}})
        got = await wait_for(sites, "miner",
                             lambda o: ready(o)["reason"] == "ImageRefused", timeout=PATIENCE)
        assert ready(got)["status"] == "False"
        await asyncio.sleep(4)  # retries would have come after 1 s and 3 s
        found = [e for e in (await events.list()).items
                 if e["regarding"].get("name") == "miner"]
        assert len(found) == 1, found
        (event,) = found
        assert (event["type"], event["reason"], event["reportingController"]) == (
            "Warning", "ReconcileFailedPermanently", "example.com/website-operator")
        assert event["note"].startswith("PermanentError: image 'untrusted.example.org/miner")
        assert "series" not in event  # once, not again
        assert op.controller.results["error"] == 1
        assert not (await deployments.list_all(field_selector="metadata.name=miner")).items

        # Deleting the Website: the finalizer deletes the children, then the Website goes.
        await sites.delete("blog")
        await wait_for_deletion(sites, "blog", timeout=PATIENCE)
        await wait_for_deletion(deployments, "blog", timeout=PATIENCE)
        await wait_for_deletion(services, "blog", timeout=PATIENCE)
        assert op.controller.results["error"] == 1  # the refused one, nothing else failed
    finally:
        stop.set()
        if task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 60)
        # the finalizer needs the operator: take it off what is left, so the namespace goes
        with contextlib.suppress(wk.ApiError):
            left = client.api(f"websites.{group}", namespace=namespace)
            for obj in (await left.list_all()).items:
                with contextlib.suppress(wk.NotFound):
                    await left.patch(wk.meta.name(obj), {"metadata": {"finalizers": None}})
        with contextlib.suppress(wk.NotFound):
            await crds.delete(f"websites.{group}")
