"""The typed example operator (examples/website_operator.py) on the simulator, tested as a
user tests theirs, with watchkeeper-sim's pytest fixtures: a Website gets its Deployment and
Service, owned; its Ready condition says what is true; the Deployment follows the replicas;
the finalizer cleans up; a refused image is one Warning Event and no retry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import website_operator

import watchkeeper as wk


def site(name: str, image: str = "nginx:1.25", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": name},
            "spec": {"image": image, **spec}}


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    found = wk.conditions.find_condition(obj, "Ready")
    assert found is not None  # "not yet" for k8s_wait_for
    return dict(found)


def ready_is(status: str, reason: str, message: str | None = None) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        cond = ready(obj)
        return (cond["status"], cond["reason"]) == (status, reason) and (
            message is None or cond["message"] == message)
    return check


async def test_a_website_gets_an_owned_deployment_and_service_and_an_honest_ready(
        k8s_client, k8s_namespace, k8s_operator, k8s_wait_for) -> None:
    await k8s_operator(lambda client: website_operator.setup(client, namespace=k8s_namespace))
    websites = k8s_client.api("websites.example.com", namespace=k8s_namespace)
    deployments = k8s_client.api("deployments.apps", namespace=k8s_namespace)
    services = k8s_client.api("services", namespace=k8s_namespace)
    created = await websites.create(site("blog", replicas=2,
                                         ports=[{"name": "web", "port": 8080}]))

    dep = await k8s_wait_for(deployments, "blog")
    svc = await k8s_wait_for(services, "blog")
    for child in (dep, svc):
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner == {"apiVersion": "example.com/v1", "kind": "Website", "name": "blog",
                         "uid": wk.meta.uid(created), "controller": True,
                         "blockOwnerDeletion": True}
    assert dep["spec"]["replicas"] == 2
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.25"
    assert container["ports"] == [{"name": "web", "containerPort": 8080, "protocol": "TCP"}]
    assert svc["spec"]["ports"][0]["port"] == 8080
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]

    # No pod is available yet (the simulator has no Deployment controller): not Ready.
    got = await k8s_wait_for(websites, "blog",
                             ready_is("False", "Progressing", "0 of 2 replicas available"))
    assert got["status"]["observedGeneration"] == 1 and got["status"]["replicas"] == 0
    assert ready(got)["observedGeneration"] == 1
    assert "finalizers" in got["metadata"]
    assert got["metadata"]["finalizers"] == [website_operator.FINALIZER]

    # The Deployment controller's report (written here as kube-controller-manager would)
    # reconciles the Website through its owner reference: now it is Ready.
    dep = await deployments.get("blog")
    await deployments.patch_status("blog", {"status": {
        "observedGeneration": dep["metadata"]["generation"], "replicas": 2,
        "readyReplicas": 2, "availableReplicas": 2}})
    got = await k8s_wait_for(websites, "blog",
                             ready_is("True", "Available", "2 of 2 replicas available"))
    assert got["status"]["replicas"] == 2

    # More replicas: the Deployment follows, and Ready is False until they are available.
    await websites.patch("blog", {"spec": {"replicas": 3}})
    await k8s_wait_for(deployments, "blog", lambda d: d["spec"]["replicas"] == 3)
    got = await k8s_wait_for(websites, "blog", ready_is("False", "Progressing"))
    assert got["status"]["observedGeneration"] == 2
    assert ready(got)["observedGeneration"] == 2


@pytest.mark.k8s_sim(garbage_collector=False)
async def test_deleting_a_website_runs_the_finalizer_cleanup(
        k8s_client, k8s_namespace, k8s_operator, k8s_wait_for) -> None:
    """Without a garbage collector only the finalizer's cleanup deletes the children."""
    await k8s_operator(lambda client: website_operator.setup(client, namespace=k8s_namespace))
    websites = k8s_client.api("websites.example.com", namespace=k8s_namespace)
    deployments = k8s_client.api("deployments.apps", namespace=k8s_namespace)
    services = k8s_client.api("services", namespace=k8s_namespace)
    await websites.create(site("shop"))
    await k8s_wait_for(deployments, "shop")
    await k8s_wait_for(services, "shop")
    await k8s_wait_for(websites, "shop", ready_is("False", "Progressing"))

    await websites.delete("shop")
    await k8s_wait_for.deletion(deployments, "shop")
    await k8s_wait_for.deletion(services, "shop")
    await k8s_wait_for.deletion(websites, "shop")


async def test_a_refused_image_is_one_permanent_error_event_and_no_retry(
        k8s_client, k8s_namespace, k8s_operator, k8s_wait_for) -> None:
    running = await k8s_operator(
        lambda client: website_operator.setup(client, namespace=k8s_namespace))
    websites = k8s_client.api("websites.example.com", namespace=k8s_namespace)
    await websites.create(site("miner", image="untrusted.example.org/miner:1.0"))

    got = await k8s_wait_for(websites, "miner", ready_is("False", "ImageRefused"))
    reason = ("image 'untrusted.example.org/miner:1.0' is from untrusted.example.org, not a "
              "trusted registry (docker.io, ghcr.io, registry.example.com)")
    assert ready(got)["message"] == reason
    events = k8s_client.api("events.k8s.io/v1/events", namespace=k8s_namespace)
    await asyncio.sleep(3)  # a retry would have come after 1 s, and another after 2 s more
    (event,) = (await events.list()).items
    assert (event["type"], event["reason"], event["note"]) == (
        "Warning", "ReconcileFailedPermanently", f"PermanentError: {reason}")
    assert event["regarding"]["kind"] == "Website" and event["regarding"]["name"] == "miner"
    assert event["reportingController"] == "example.com/website-operator"
    (ctl,) = running.controllers
    assert ctl.results["error"] == 1  # reconciled once: its own status write is no trigger
    with pytest.raises(wk.NotFound):
        await k8s_client.api("deployments.apps", namespace=k8s_namespace).get("miner")

    # The fix is a change of the spec: reconciled at once, served.
    await websites.patch("miner", {"spec": {"image": "registry.example.com/miner:1.0"}})
    await k8s_wait_for(websites, "miner", ready_is("False", "Progressing"))
    dep = await k8s_client.api("deployments.apps", namespace=k8s_namespace).get("miner")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.example.com/miner:1.0")
