"""`watchkeeper webhooks` output is accepted by a real kube-apiserver: the configurations
and the conversion CRD it prints pass `kubectl apply --dry-run=server` (nothing is stored),
for a Service clientConfig and for a url one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import yaml

import watchkeeper as wk
from e2e.test_webhook_server import kubectl

MODULE = """\
import watchkeeper as wk
from watchkeeper.webhooks import CertificateManager, WebhookCerts, WebhookServer


class Spec(wk.Schema):
    size: int = 1


@wk.custom_resource(group="{ns}.example.com", version="v1", kind="Gadget", storage=True)
class GadgetV1(wk.CustomResource):
    spec: Spec


@wk.custom_resource(group="{ns}.example.com", version="v2", kind="Gadget")
class GadgetV2(wk.CustomResource):
    spec: Spec


certs = CertificateManager(wk.Client(wk.ClientConfig(server="https://127.0.0.1:1")),
                           WebhookCerts("hooks", "{ns}", validating=("{ns}-check",),
                                        mutating=("{ns}-stamp",)))
hooks = WebhookServer(certs)


@hooks.validating("/check", model=GadgetV1, failure_policy="Ignore",
                  namespace_selector={{"matchLabels": {{"kubernetes.io/metadata.name": "{ns}"}}}})
async def check(req): ...


@hooks.validating("/check-cms", model=wk.k8s.ConfigMap, operations=["DELETE"],
                  scope="Namespaced", object_selector={{"matchLabels": {{"keep": "yes"}}}},
                  side_effects="NoneOnDryRun", match_policy="Exact")
async def keep(req): ...


@hooks.mutating("/stamp", resources=["pods"], api_groups=[""], api_versions=["v1"],
                reinvocation_policy="IfNeeded", timeout=30)
async def stamp(req): ...


hooks.conversion("/convert", GadgetV1, GadgetV2)
"""


def generate(module: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "watchkeeper.cli", "webhooks",
                          f"{module}:hooks", *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_the_printed_registration_passes_a_server_side_dry_run(
    client: wk.Client, namespace: str, tmp_path: Path,
) -> None:
    module = tmp_path / "hooks_module.py"
    module.write_text(MODULE.format(ns=namespace))
    for args in ((), ("--name", f"{namespace}-dev", "--url", "https://127.0.0.1:9443")):
        manifests = await asyncio.to_thread(generate, module, *args)
        kinds = [d["kind"] for d in yaml.safe_load_all(manifests)]
        assert kinds == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                         "CustomResourceDefinition"]
        applied = await asyncio.to_thread(kubectl, "apply", "--dry-run=server", "-f", "-",
                                          stdin=manifests)
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.count("(server dry run)") == 3, applied.stdout
    # a dry run stores nothing
    hooks = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
    names = {h["metadata"]["name"] for h in (await hooks.list()).items}
    assert not names & {f"{namespace}-check", f"{namespace}-dev"}
