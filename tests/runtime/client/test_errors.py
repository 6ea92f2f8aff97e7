"""Error classification against real kube-apiserver 1.28 responses (the reference pack)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client.errors import error_from_response, error_from_status

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28"  # in the repo


def exchange(number: str) -> dict[str, Any]:
    (path,) = REFERENCE.glob(f"{number}-*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def error_for(number: str) -> wk.ApiError:
    resp = exchange(number)["response"]
    body = resp["body"]
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return error_from_response(
        resp["status"], raw, method="GET", path="/x", headers=resp["headers"]
    )


@pytest.mark.parametrize(
    ("number", "cls", "transient"),
    [
        ("073", wk.Unauthorized, False),
        ("074", wk.Forbidden, False),
        ("076", wk.Forbidden, False),
        ("081", wk.NotFound, False),
        ("082", wk.NotFound, False),
        ("083", wk.NotFound, False),
        ("088", wk.AlreadyExists, False),
        ("089", wk.Conflict, False),
        ("090", wk.Invalid, False),
        ("092", wk.BadRequest, False),
        ("047", wk.Gone, True),
        ("046", wk.Timeout, True),
        ("060", wk.ServerError, True),
        ("174", wk.TooManyRequests, True),
        ("176", wk.TooManyRequests, True),
    ],
)
def test_real_responses_map_to_documented_classes(
    number: str, cls: type[wk.ApiError], transient: bool
) -> None:
    err = error_for(number)
    assert type(err) is cls
    assert err.is_transient is transient
    assert err.code == exchange(number)["response"]["status"]


def test_forbidden_names_user_verb_resource_namespace_and_the_rule_to_grant() -> None:
    text = str(error_for("076"))
    assert 'User "limited" cannot list resource "configmaps"' in text
    assert 'namespace "errors"' in text
    assert 'Role rule in namespace "errors"' in text
    assert 'resources: ["configmaps"], verbs: ["list"]' in text


def test_cluster_scope_forbidden_suggests_a_cluster_role() -> None:
    text = str(error_for("080"))
    assert "ClusterRole" in text and 'verbs: ["list"]' in text


def test_missing_type_asks_about_the_crd_but_missing_object_does_not() -> None:
    assert "is the CRD installed" in str(error_for("082"))
    assert "is the CRD installed" in str(error_for("083"))  # plain-text 404 of an unknown group
    assert "CRD" not in str(error_for("081"))  # a missing object of a known type


def test_retry_after_from_header_and_from_status_details() -> None:
    expected = float(exchange("174")["response"]["headers"]["Retry-After"])
    assert error_for("174").retry_after == expected
    assert error_for("046").retry_after == 1.0


def test_watch_error_event_410_is_gone() -> None:
    line = exchange("062")["response"]["lines"][0]
    err = error_from_status(line["object"])
    assert isinstance(err, wk.Gone)
    assert "too old resource version" in str(err)


def test_plain_text_429_keeps_its_message() -> None:
    err = error_for("174")
    assert "Too many requests" in err.message
    assert "retrying after" in str(err)


# -- admission webhooks: the error names the webhook -------------------------------------

WEBHOOK_STATUSES: dict[str, Any] = json.loads(
    (Path(__file__).with_name("webhook_statuses.json")).read_text())


@pytest.mark.parametrize("case", ["unreachable_stopped_server", "unreachable_closed_port"])
def test_a_webhook_that_cannot_be_called_is_webhook_failed_naming_it(case: str) -> None:
    recorded = WEBHOOK_STATUSES[case]
    err = error_from_response(recorded["http_code"], json.dumps(recorded["body"]).encode(),
                              method="POST", path="/api/v1/namespaces/x/configmaps")
    assert type(err) is wk.WebhookFailed and isinstance(err, wk.ServerError)
    assert err.is_transient and err.code == 500 and err.reason == "InternalError"
    assert err.webhook == recorded["webhook"]
    assert f'admission webhook "{recorded["webhook"]}" could not be called' in str(err)


def test_a_webhooks_denial_keeps_the_class_of_its_code_and_names_the_webhook() -> None:
    recorded = WEBHOOK_STATUSES["denied_422"]
    err = error_from_response(recorded["http_code"], json.dumps(recorded["body"]).encode())
    assert type(err) is wk.Invalid and err.code == 422
    assert err.webhook == "guard.errors.example.com"
    # the same denial with the handler's default code (403) is a Forbidden naming it
    forbidden = error_from_status({**recorded["body"], "code": 403})
    assert type(forbidden) is wk.Forbidden and forbidden.webhook == "guard.errors.example.com"


def test_a_denial_with_code_500_is_no_webhook_failure_and_other_errors_name_no_webhook(
) -> None:
    denied = WEBHOOK_STATUSES["denied_422"]["body"]
    err = error_from_status({**denied, "code": 500})
    assert type(err) is wk.ServerError and err.webhook == "guard.errors.example.com"
    plain = error_from_status({"kind": "Status", "code": 500, "reason": "InternalError",
                               "message": "Internal error occurred: etcdserver: timeout"})
    assert type(plain) is wk.ServerError and plain.webhook is None
    assert error_for("074").webhook is None
