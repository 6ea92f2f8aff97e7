"""The simulator calls admission webhooks as kube-apiserver 1.28 does (issue 24 item 6):
each test runs a real HTTPS webhook server on 127.0.0.1 (tests/sim/hookserver.py) and
speaks to the simulator over HTTP. Texts are the real server's (the recorded files in
tests/fixtures/apiserver-1.28-issue24, compared one by one in
tests/sim/contract/test_contract_admission.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from watchkeeper_sim import ApiServer

from ..conftest import Req
from ..hookserver import (
    HookServer,
    add_label,
    allow,
    answer,
    configuration,
    deny,
    hook_server,
    patch,
    slow,
    webhook,
)

pytestmark = pytest.mark.realtime
CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def hooks() -> AsyncIterator[HookServer]:
    async with hook_server() as server:
        yield server


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_mutating_webhooks_run_by_configuration_name_then_validation_then_validating(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/a"] = lambda r: answer(allow(r, warnings=["from a"],
                                                 **patch(add_label(r, "a", "1"))))
    hooks.answers["/b"] = lambda r: answer(allow(r, **patch(add_label(r, "b", "1"))))
    hooks.answers["/v"] = lambda r: answer(allow(r, warnings=["from v"]))
    # created in the other order: the API server sorts configurations by name
    apiserver.create_object(configuration(True, "z-second", webhook(
        "b.example.com", hooks.client_config("/b"))))
    apiserver.create_object(configuration(True, "a-first", webhook(
        "a.example.com", hooks.client_config("/a"))))
    apiserver.create_object(configuration(False, "checks", webhook(
        "v.example.com", hooks.client_config("/v"))))

    status, body, headers = await req("POST", CMS, json=cm("one", mode="fast"),
                                      params={"fieldManager": "tester"})
    assert status == 201, body
    assert hooks.paths() == ["/a", "/b", "/v"]
    assert body["metadata"]["labels"] == {"a": "1", "b": "1"}
    assert headers.getall("Warning") == ['299 - "from a"', '299 - "from v"']
    # a webhook's change is stored but owned by nobody (recorded file 001)
    assert [e["manager"] for e in body["metadata"]["managedFields"]] == ["tester"]
    assert "f:metadata" not in body["metadata"]["managedFields"][0]["fieldsV1"]

    first, second, validating = (c.request for c in hooks.calls)
    assert first["operation"] == "CREATE" and first["oldObject"] is None
    assert first["object"]["metadata"]["creationTimestamp"] is None
    assert "uid" not in first["object"]["metadata"]
    assert second["object"]["metadata"]["labels"] == {"a": "1"}  # a's patch applied first
    assert validating["object"]["metadata"]["uid"] == body["metadata"]["uid"]
    assert validating["object"]["metadata"]["labels"] == {"a": "1", "b": "1"}
    assert validating["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                                     "fieldManager": "tester"}
    assert validating["userInfo"]["username"] == "admin"
    assert all(c.query == "timeout=10s" for c in hooks.calls)  # the default timeoutSeconds


async def test_denials_in_the_real_servers_words(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/deny"] = lambda r: answer(deny(r, _DENIALS[r["request"]["name"]]))
    apiserver.create_object(configuration(False, "guard", webhook(
        "deny.example.com", hooks.client_config("/deny"))))
    got = {}
    for name in _DENIALS:
        status, body, _ = await req("POST", CMS, json=cm(name))
        got[name] = (status, body.get("reason"), body["message"], body.get("details"))
    prefix = 'admission webhook "deny.example.com" denied the request'
    assert got == {  # files 008-011
        "bare": (400, None, f"{prefix} without explanation", None),
        "message": (400, None, f"{prefix}: no, not this one", None),
        "invalid": (422, "Invalid", f"{prefix}: bad data", None),
        "reason": (400, "NotWelcome", f"{prefix}: NotWelcome", None),
    }
    status, _, _ = await req("GET", f"{CMS}/bare")
    assert status == 404


_DENIALS: dict[str, dict[str, Any] | None] = {
    "bare": None, "message": {"message": "no, not this one"},
    "invalid": {"code": 422, "reason": "Invalid", "message": "bad data"},
    "reason": {"reason": "NotWelcome"},
}


async def test_an_unreachable_webhook_fails_closed_or_open_by_its_failure_policy(
    apiserver: ApiServer, req: Req,
) -> None:
    port = closed_port()
    url = f"https://127.0.0.1:{port}/check"
    apiserver.create_object(configuration(False, "guard", webhook(
        "down.example.com", {"url": url})))  # failurePolicy defaults to Fail
    status, body, _ = await req("POST", CMS, json=cm("x"))
    cause = (f'failed calling webhook "down.example.com": failed to call webhook: Post '
             f'"{url}?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    assert (status, body["reason"], body["message"], body["details"]) == (  # file 012
        500, "InternalError", f"Internal error occurred: {cause}",
        {"causes": [{"message": cause}]})

    status, body, _ = await req(
        "PATCH", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guard",
        json=[{"op": "add", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
        headers={"Content-Type": "application/json-patch+json"})
    assert status == 200, body
    status, body, _ = await req("POST", CMS, json=cm("x"))
    assert status == 201, body  # file 014


async def test_a_slow_webhook_times_out_after_its_timeout_seconds(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/slow"] = lambda r: slow(r, 5)
    apiserver.create_object(configuration(False, "guard", webhook(
        "slow.example.com", hooks.client_config("/slow"), timeoutSeconds=1),
        webhook("lenient.example.com", hooks.client_config("/slow"), timeoutSeconds=1,
                failurePolicy="Ignore")))
    started = time.monotonic()
    status, body, _ = await req("POST", CMS, json=cm("x"))
    took = time.monotonic() - started
    assert status == 500
    assert body["message"] == (  # file 016
        'Internal error occurred: failed calling webhook "slow.example.com": failed to call '
        f'webhook: Post "{hooks.url("/slow")}?timeout=1s": context deadline exceeded')
    assert [c.query for c in hooks.calls] == ["timeout=1s", "timeout=1s"]
    assert took >= 0.9
    assert abs(hooks.calls[1].at - hooks.calls[0].at) < 0.9  # called at once, not in turn


async def test_invalid_answers_are_call_failures(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    def wrong_uid(r: dict[str, Any]) -> dict[str, Any]:
        out = allow(r)
        out["response"]["uid"] = "not-the-uid"
        return out

    hooks.answers["/uid"] = lambda r: answer(wrong_uid(r))
    hooks.answers["/version"] = lambda r: answer({**allow(r),
                                                  "apiVersion": "admission.k8s.io/v1beta1"})
    hooks.answers["/patch"] = lambda r: answer(allow(r, **patch([])))
    messages = []
    for path in ("/uid", "/version", "/patch"):
        apiserver.create_object(configuration(False, f"guard{path.replace('/', '-')}", webhook(
            "bad.example.com", hooks.client_config(path))))
        status, body, _ = await req("POST", CMS, json=cm("x"))
        assert status == 500
        messages.append(body["message"].replace(hooks.calls[-1].request["uid"], "UID"))
        apiserver.delete_object("admissionregistration.k8s.io/v1",
                                "ValidatingWebhookConfiguration",
                                f"guard{path.replace('/', '-')}")
    head = 'Internal error occurred: failed calling webhook "bad.example.com": '
    assert messages == [  # files 020, 022, 026
        head + 'received invalid webhook response: expected response.uid="UID", '
               'got "not-the-uid"',
        head + "failed to call webhook: converting (v1beta1.AdmissionReview) to "
               "(v1.AdmissionReview): unknown conversion",
        head + "received invalid webhook response: validating webhook may not return "
               "response.patch",
    ]


async def test_selectors_namespace_labels_and_old_or_new_object_labels(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/ns"] = lambda r: answer(allow(r))
    hooks.answers["/obj"] = lambda r: answer(allow(r))
    for name, labels in (("team", {"guarded": "yes"}), ("other", {})):
        apiserver.create_object({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name, "labels": labels}})
    apiserver.create_object(configuration(False, "by-namespace", webhook(
        "ns.example.com", hooks.client_config("/ns"),
        resources=("configmaps", "namespaces"),
        namespaceSelector={"matchExpressions": [
            {"key": "guarded", "operator": "In", "values": ["yes"]}]})))
    apiserver.create_object(configuration(False, "by-object", webhook(
        "obj.example.com", hooks.client_config("/obj"),
        objectSelector={"matchLabels": {"watch": "me"}})))

    for ns in ("team", "other"):
        assert (await req("POST", f"/api/v1/namespaces/{ns}/configmaps",
                          json=cm("a")))[0] == 201
    assert [(c.path, c.request["namespace"]) for c in hooks.calls] == [("/ns", "team")]
    hooks.calls.clear()
    # a namespace's create is matched against its own labels; its namespace is its name
    assert (await req("POST", "/api/v1/namespaces", json={
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "new", "labels": {"guarded": "yes"}}}))[0] == 201
    assert [(c.path, c.request["namespace"]) for c in hooks.calls] == [("/ns", "new")]
    hooks.calls.clear()

    assert (await req("POST", CMS, json=cm("w", labels={"watch": "me"})))[0] == 201
    assert (await req("POST", CMS, json=cm("plain")))[0] == 201
    # an update that removes the label is still seen: the old object matches
    status, _, _ = await req("PATCH", f"{CMS}/w", json={"metadata": {"labels": None}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    assert [(c.path, c.request["name"], c.request["operation"]) for c in hooks.calls] == [
        ("/obj", "w", "CREATE"), ("/obj", "w", "UPDATE")]


async def test_dry_runs_reach_only_webhooks_without_side_effects(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/m"] = lambda r: answer(allow(r, **patch(add_label(r, "m", "1"))))
    apiserver.create_object(configuration(True, "quiet", webhook(
        "quiet.example.com", hooks.client_config("/m"), sideEffects="NoneOnDryRun")))
    status, body, _ = await req("POST", CMS, json=cm("dry"), params={"dryRun": "All"})
    assert status == 201 and body["metadata"]["labels"] == {"m": "1"}
    (call,) = hooks.calls
    assert call.request["dryRun"] is True  # file 028
    assert call.request["options"]["dryRun"] == ["All"]
    assert (await req("GET", f"{CMS}/dry"))[0] == 404

    # sideEffects Unknown (v1 refuses it on write; stored here as v1beta1 allowed it)
    apiserver.create_object(configuration(True, "sideways", webhook(
        "sideways.example.com", hooks.client_config("/m"), sideEffects="Unknown",
        failurePolicy="Ignore")))
    status, body, _ = await req("POST", CMS, json=cm("dry"), params={"dryRun": "All"})
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", 'admission webhook "sideways.example.com" does not support dry run')
    status, _, _ = await req("POST", CMS, json=cm("wet"))
    assert status == 201  # a write that is no dry run calls it


async def test_if_needed_webhooks_are_called_again_after_a_later_change(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/a"] = lambda r: answer(allow(r, **patch(add_label(r, "a", "1"))))
    hooks.answers["/b"] = lambda r: answer(allow(r, **patch(add_label(r, "b", "1"))))
    hooks.answers["/c"] = lambda r: answer(allow(r))
    apiserver.create_object(configuration(True, "1-a", webhook(
        "a.example.com", hooks.client_config("/a"), reinvocationPolicy="IfNeeded"),
        webhook("c.example.com", hooks.client_config("/c"), reinvocationPolicy="IfNeeded")))
    apiserver.create_object(configuration(True, "2-b", webhook(
        "b.example.com", hooks.client_config("/b"))))
    status, body, _ = await req("POST", CMS, json=cm("re"))
    assert status == 201
    assert hooks.paths() == ["/a", "/c", "/b", "/a", "/c"]  # file 029: a, b, a
    assert body["metadata"]["labels"] == {"a": "1", "b": "1"}
    assert hooks.calls[3].request["object"]["metadata"]["labels"] == {"a": "1", "b": "1"}


async def test_rules_with_subresources(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/status"] = lambda r: answer(deny(r, {"message": "status is frozen"}))
    apiserver.create_object(configuration(False, "status-guard", webhook(
        "status.example.com", hooks.client_config("/status"), group="apps",
        resources=("deployments/status",), operations=("UPDATE",))))
    deploys = "/apis/apps/v1/namespaces/default/deployments"
    status, created, _ = await req("POST", deploys, json={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    assert status == 201, created
    created["spec"]["replicas"] = 2
    status, updated, _ = await req("PUT", f"{deploys}/d", json=created)
    assert status == 200 and not hooks.calls  # the deployment itself: no rule for it
    updated["status"] = {"replicas": 1}
    status, body, _ = await req("PUT", f"{deploys}/d/status", json=updated)
    assert (status, body["message"]) == (
        400, 'admission webhook "status.example.com" denied the request: status is frozen')
    (call,) = hooks.calls
    assert (call.request["subResource"], call.request["requestSubResource"]) == (
        "status", "status")
    assert call.request["kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert call.request["oldObject"]["spec"]["replicas"] == 2


async def test_deletes_show_the_old_object_and_may_not_be_patched(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/v"] = lambda r: answer(allow(r))
    hooks.answers["/m"] = lambda r: answer(allow(r, **patch(add_label(r, "m", "1"))))
    apiserver.create_object(cm("gone"))
    apiserver.create_object(configuration(False, "watch-deletes", webhook(
        "v.example.com", hooks.client_config("/v"), operations=("DELETE",))))
    status, _, _ = await req("DELETE", f"{CMS}/gone", json={"propagationPolicy": "Background"})
    assert status == 200
    (call,) = hooks.calls
    assert call.request["object"] is None
    assert call.request["oldObject"]["metadata"]["name"] == "gone"
    assert call.request["options"] == {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                                       "propagationPolicy": "Background"}
    apiserver.create_object(cm("kept"))
    apiserver.create_object(configuration(True, "patch-deletes", webhook(
        "m.example.com", hooks.client_config("/m"), operations=("DELETE",))))
    status, body, _ = await req("DELETE", f"{CMS}/kept")
    assert (status, body["message"]) == (500, (  # file 030
        'Internal error occurred: admission webhook "m.example.com" attempted to modify the '
        "object, which is not supported for this operation"))
    assert (await req("GET", f"{CMS}/kept"))[0] == 200


async def test_webhook_configurations_are_never_sent_to_webhooks(
    apiserver: ApiServer, hooks: HookServer, req: Req,
) -> None:
    hooks.answers["/all"] = lambda r: answer(deny(r))
    apiserver.create_object(configuration(False, "everything", webhook(
        "all.example.com", hooks.client_config("/all"), group="*", resources=("*",))))
    status, _, _ = await req(
        "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        json=configuration(False, "another", webhook("x.example.com", {"url": "https://x"},
                                                     resources=("secrets",))))
    assert status == 201 and not hooks.calls
    status, _, _ = await req("POST", CMS, json=cm("x"))
    assert status == 400 and hooks.paths() == ["/all"]
