"""Review handling without HTTP: AdmissionReview v1 in, AdmissionReview v1 out (the uid
echoed, denials with their code and message, warnings, the base64 JSON patch, dry run, a
handler that raises or outlives its timeout, typed objects); ConversionReview v1."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.webhooks import AdmissionRequest, Denied
from watchkeeper.webhooks.admission import AdmissionHandler, review_admission
from watchkeeper.webhooks.conversion import ConversionHandler, review_conversion

from ..typed.versions import SiteV1, SiteV1alpha1, SiteV1beta1

CM = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "cm", "namespace": "default"}, "data": {"mode": "fast"}}


def admission_review(obj: dict[str, Any] | None = None, *, dry_run: bool = False,
                     uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "namespace": "default",
                        "name": "cm", "object": obj or CM, "oldObject": None,
                        "dryRun": dry_run, "userInfo": {"username": "alice"}}}


async def test_a_validating_handler_that_returns_allows_and_its_warnings_reach_the_client(
) -> None:
    seen: list[AdmissionRequest[Any]] = []

    async def check(req: AdmissionRequest[Any]) -> None:
        seen.append(req)
        req.warn("mode fast is deprecated")

    out = await review_admission(AdmissionHandler("/v", check), admission_review(uid="u-1"))
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"] == {"uid": "u-1", "allowed": True,
                               "warnings": ["mode fast is deprecated"]}
    (req,) = seen
    assert (req.operation, req.name, req.namespace, req.user, req.dry_run) == (
        "CREATE", "cm", "default", "alice", False)
    assert req.object == CM and req.old_object is None


async def test_denied_carries_its_code_and_message() -> None:
    async def check(req: AdmissionRequest[Any]) -> None:
        req.warn("look again")
        raise Denied("data.mode must be one of slow, medium", code=422)

    handler = AdmissionHandler("/v", check)
    out = (await review_admission(handler, admission_review(uid="u-2")))["response"]
    assert out == {"uid": "u-2", "allowed": False, "warnings": ["look again"],
                   "status": {"code": 422, "message": "data.mode must be one of slow, medium"}}
    assert (handler.stats.requests, handler.stats.denials, handler.stats.errors) == (1, 1, 0)


async def test_a_mutating_handler_on_typed_objects_answers_with_a_base64_json_patch() -> None:
    def mutate(req: AdmissionRequest[wk.k8s.ConfigMap]) -> wk.k8s.ConfigMap:
        cm = req.object
        assert isinstance(cm, wk.k8s.ConfigMap)  # typed: the handler named a model
        cm.data = {**(cm.data or {}), "owner": "team-a"}
        return cm

    handler = AdmissionHandler("/m", mutate, mutating=True, model=wk.k8s.ConfigMap)
    out = (await review_admission(handler, admission_review()))["response"]
    assert out["allowed"] is True and out["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(out["patch"])) == [
        {"op": "add", "path": "/data/owner", "value": "team-a"}]


async def test_a_mutating_handler_that_changes_nothing_sends_no_patch() -> None:
    async def same(req: AdmissionRequest[Any]) -> dict[str, Any]:
        return dict(req.object or {})

    out = (await review_admission(AdmissionHandler("/m", same, mutating=True),
                                  admission_review()))["response"]
    assert "patch" not in out and "patchType" not in out and out["allowed"] is True


async def test_a_handler_that_raises_denies_with_a_clear_message_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(req: AdmissionRequest[Any]) -> None:
        raise KeyError("spec")

    handler = AdmissionHandler("/v", broken)
    with caplog.at_level(logging.ERROR, "watchkeeper.webhooks"):
        out = (await review_admission(handler, admission_review(uid="u-3")))["response"]
    assert out == {"uid": "u-3", "allowed": False, "status": {
        "code": 500, "message": "admission webhook /v failed: KeyError: 'spec'"}}
    assert "admission webhook /v failed: KeyError" in caplog.text and "u-3" in caplog.text
    assert (handler.stats.requests, handler.stats.denials, handler.stats.errors) == (1, 1, 1)


async def test_a_handler_that_raises_allows_when_its_failure_policy_is_ignore() -> None:
    async def broken(req: AdmissionRequest[Any]) -> None:
        raise RuntimeError("boom")

    handler = AdmissionHandler("/v", broken, failure_policy="Ignore")
    out = (await review_admission(handler, admission_review()))["response"]
    assert out["allowed"] is True and "status" not in out
    assert out["warnings"] == [
        "admission webhook /v failed: RuntimeError: boom; allowed (failurePolicy Ignore)"]
    assert (handler.stats.denials, handler.stats.errors) == (0, 1)


@pytest.mark.looptime
async def test_a_handler_past_its_timeout_denies() -> None:
    async def slow(req: AdmissionRequest[Any]) -> None:
        await asyncio.sleep(60)

    handler = AdmissionHandler("/v", slow, timeout=2.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    out = (await review_admission(handler, admission_review()))["response"]
    assert loop.time() - started == pytest.approx(2.0)
    assert out["allowed"] is False
    assert out["status"] == {"code": 500, "message": "admission webhook /v timed out after 2s"}
    assert handler.stats.errors == 1


async def test_a_handler_sees_a_dry_run_and_can_skip_its_side_effects() -> None:
    effects: list[str] = []

    async def record(req: AdmissionRequest[Any]) -> None:
        if not req.dry_run:
            effects.append(req.uid)

    handler = AdmissionHandler("/v", record)
    await review_admission(handler, admission_review(uid="dry", dry_run=True))
    await review_admission(handler, admission_review(uid="real"))
    assert effects == ["real"]


async def test_a_review_without_a_request_uid_is_refused() -> None:
    async def never(req: AdmissionRequest[Any]) -> None:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match=r"request\.uid"):
        await review_admission(AdmissionHandler("/v", never), {"request": {}})


def alpha_dict(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "versions.example.com/v1alpha1", "kind": "Site",
            "metadata": {"name": "s", "namespace": "default", "uid": "1"},
            "spec": {"image": "nginx:1.25", **spec}}


def test_a_conversion_review_converts_every_object_and_back() -> None:
    handler = ConversionHandler("/c", [SiteV1alpha1, SiteV1beta1, SiteV1])
    objs = [alpha_dict(replicas=3, debug=True), alpha_dict(replicas=2)]
    out = review_conversion(handler, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": "versions.example.com/v1beta1",
                    "objects": objs}})
    resp = out["response"]
    assert out["kind"] == "ConversionReview" and resp["uid"] == "c-1"
    assert resp["result"] == {"status": "Success"}
    assert [o["apiVersion"] for o in resp["convertedObjects"]] == [
        "versions.example.com/v1beta1"] * 2
    assert resp["convertedObjects"][0]["spec"] == {"image": "nginx:1.25", "size": 3}
    back = review_conversion(handler, {"request": {
        "uid": "c-2", "desiredAPIVersion": "versions.example.com/v1alpha1",
        "objects": resp["convertedObjects"]}})["response"]
    assert [o["spec"] for o in back["convertedObjects"]] == [o["spec"] for o in objs]
    assert back["convertedObjects"][0]["metadata"] == objs[0]["metadata"]


def test_a_conversion_to_an_unknown_version_fails_the_review() -> None:
    handler = ConversionHandler("/c", [SiteV1alpha1, SiteV1])
    resp = review_conversion(handler, {"request": {
        "uid": "c-3", "desiredAPIVersion": "versions.example.com/v2",
        "objects": [alpha_dict()]}})["response"]
    assert resp["uid"] == "c-3" and resp["convertedObjects"] == []
    assert resp["result"] == {"status": "Failure", "message": (
        "conversion webhook /c: ValueError: no class for desiredAPIVersion "
        "versions.example.com/v2")}
    assert handler.stats.errors == 1


async def test_a_timeout_error_of_the_handlers_own_is_no_timeout_of_the_handler() -> None:
    """A call inside the handler that timed out is the handler's failure, named as such:
    the user must not read "timed out after 10s" for a handler that failed at once."""
    async def calls_out(req: AdmissionRequest[Any]) -> None:
        raise TimeoutError("the quota service did not answer")

    out = (await review_admission(AdmissionHandler("/v", calls_out), admission_review()))
    assert out["response"]["status"]["message"] == (
        "admission webhook /v failed: TimeoutError: the quota service did not answer")
