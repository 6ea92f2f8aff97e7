"""`watchkeeper webhooks MODULE:ATTR` prints the webhook configurations and conversion CRDs
that register a WebhookServer's handlers, as YAML for `kubectl apply -f -`; a target that is
no server, or handlers that cannot be registered, is one `error:` line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_cli_errors import cli, error_line

pytestmark = pytest.mark.realtime

HOOKS = """\
from __future__ import annotations

import ssl

import watchkeeper as wk
from watchkeeper.webhooks import CertificateManager, WebhookCerts, WebhookServer


class Spec(wk.Schema):
    size: int = 1


@wk.custom_resource(group="example.com", version="v1", kind="Gadget", storage=True)
class GadgetV1(wk.CustomResource):
    spec: Spec


@wk.custom_resource(group="example.com", version="v2", kind="Gadget")
class GadgetV2(wk.CustomResource):
    spec: Spec


client = wk.Client(wk.ClientConfig(server="https://127.0.0.1:1"))
certs = CertificateManager(client, WebhookCerts(
    "gadget-hooks", "gadgets", validating=("gadget-validation",),
    mutating=("gadget-defaults",), crds=("gadgets.example.com",)))
hooks = WebhookServer(certs)


@hooks.validating("/validate-gadgets", model=GadgetV1, operations=["CREATE", "UPDATE"],
                  failure_policy="Ignore", timeout=3)
async def check(req): ...


@hooks.validating("/validate-cms", model=wk.k8s.ConfigMap, operations="DELETE",
                  name="cms.gadgets.example.com", scope="Namespaced",
                  namespace_selector={"matchLabels": {"team": "gadgets"}},
                  object_selector={"matchLabels": {"protected": "yes"}},
                  match_policy="Exact", side_effects="NoneOnDryRun")
async def keep(req): ...


@hooks.mutating("/default-pods", resources=["pods"], api_groups=[""], api_versions=["v1"],
                reinvocation_policy="IfNeeded")
async def default(req): ...


hooks.conversion("/convert-gadgets", GadgetV1, GadgetV2)

plain = WebhookServer(ssl.create_default_context())


@plain.validating("/anything", resources="pods")
async def anything(req): ...


nothing = 3
"""


def docs_of(out: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(out)}


async def test_prints_the_configurations_and_the_conversion_crd(tmp_path: Path) -> None:
    module = tmp_path / "gadget_hooks.py"
    module.write_text(HOOKS)
    code, out, err = await cli("webhooks", f"{module}:hooks")
    assert code == 0, err
    assert out.startswith("---\napiVersion: admissionregistration.k8s.io/v1\n")
    docs = docs_of(out)
    assert list(docs) == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                          "CustomResourceDefinition"]
    validating = docs["ValidatingWebhookConfiguration"]
    # the names the CertificateManager publishes the caBundle to; the Service it serves
    assert validating["metadata"] == {"name": "gadget-validation"}
    service = {"name": "gadget-hooks", "namespace": "gadgets", "port": 443}
    assert validating["webhooks"] == [
        {"name": "validate-gadgets.gadget-validation.watchkeeper.dev",
         "admissionReviewVersions": ["v1"],
         "clientConfig": {"service": {**service, "path": "/validate-gadgets"}},
         "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"],
                    "apiVersions": ["v1"], "resources": ["gadgets"], "scope": "*"}],
         "failurePolicy": "Ignore", "matchPolicy": "Equivalent", "sideEffects": "None",
         "timeoutSeconds": 4},
        {"name": "cms.gadgets.example.com", "admissionReviewVersions": ["v1"],
         "clientConfig": {"service": {**service, "path": "/validate-cms"}},
         "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "scope": "Namespaced"}],
         "failurePolicy": "Fail", "matchPolicy": "Exact", "sideEffects": "NoneOnDryRun",
         "timeoutSeconds": 11,
         "objectSelector": {"matchLabels": {"protected": "yes"}},
         "namespaceSelector": {"matchLabels": {"team": "gadgets"}}},
    ]
    mutating = docs["MutatingWebhookConfiguration"]
    assert mutating["metadata"] == {"name": "gadget-defaults"}
    (hook,) = mutating["webhooks"]
    assert hook["name"] == "default-pods.gadget-defaults.watchkeeper.dev"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["rules"][0]["resources"] == ["pods"]
    crd = docs["CustomResourceDefinition"]
    assert crd["metadata"]["name"] == "gadgets.example.com"
    assert crd["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {**service, "path": "/convert-gadgets"}}}}


async def test_a_url_and_a_name_replace_the_service_and_the_names(tmp_path: Path) -> None:
    module = tmp_path / "gadget_hooks.py"
    module.write_text(HOOKS)
    code, out, err = await cli("webhooks", f"{module}:hooks", "--name", "dev",
                               "--url", "https://127.0.0.1:9443/")
    assert code == 0, err
    docs = docs_of(out)
    assert docs["MutatingWebhookConfiguration"]["metadata"]["name"] == "dev"
    hook = docs["ValidatingWebhookConfiguration"]["webhooks"][0]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:9443/validate-gadgets"}
    assert hook["name"] == "validate-gadgets.dev.watchkeeper.dev"
    # a --service without a CertificateManager's names: the configurations take its name
    code, out, err = await cli("webhooks", f"{module}:plain", "--service", "svc",
                               "--namespace", "ns", "--port", "8443")
    assert code == 0, err
    (only,) = yaml.safe_load_all(out)
    assert only["metadata"]["name"] == "svc"


@pytest.mark.parametrize(("target", "extra", "message"), [
    ("{module}", (), "'{module}': name the server, as module:attr or path/to/file.py:attr"),
    ("{module}:nope", (), "'{module}' has no attribute 'nope'"),
    ("{module}:nothing", (), "{module}:nothing is 3, not a wk.webhooks.WebhookServer"),
    ("{module}:plain", (), "say where the API server reaches the webhooks: a Service"),
    ("{module}:plain", ("--url", "https://h:1"), "name the webhook configurations: pass --name"),
    ("{module}:plain", ("--name", "x", "--url", "http://h:1"),
     "the webhook url must start with https://, not 'http://h:1'"),
    ("{bare}:plain", ("--name", "x", "--url", "https://h:1"),
     "webhook /anything names no resources: pass resources=[...] (and api_groups) or a model"),
])
async def test_mistakes_are_one_error_line(tmp_path: Path, target: str, extra: tuple[str, ...],
                                           message: str) -> None:
    paths = {"module": tmp_path / "gadget_hooks.py", "bare": tmp_path / "bare.py"}
    paths["module"].write_text(HOOKS)
    paths["bare"].write_text(HOOKS.replace(', resources="pods"', ""))
    code, out, err = await cli("webhooks", target.format(**paths), *extra)
    assert code == 2, err
    assert out == ""
    assert error_line(err).startswith(f"error: {message.format(**paths)}"), err


async def test_a_rule_the_api_server_would_refuse_is_refused_at_declaration(
    tmp_path: Path,
) -> None:
    module = tmp_path / "bad.py"
    module.write_text(HOOKS.replace('operations="DELETE"', 'operations="REMOVE"'))
    code, _, err = await cli("webhooks", f"{module}:hooks")
    assert code == 2
    assert "operations must be some of CREATE, UPDATE, DELETE, CONNECT, *, not ['REMOVE']" in (
        error_line(err))
