"""Put the CA bundle where the API server reads it: webhook configurations and CRDs.

Each write happens only when the value differs, so every replica may run it every period.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from watchkeeper.client.api import Api
from watchkeeper.client.client import Client

log = logging.getLogger("watchkeeper.webhooks")


def encode(bundle_pem: bytes) -> str:
    return base64.b64encode(bundle_pem).decode("ascii")


async def patch_webhook_configuration(api: Api, name: str, bundle_pem: bytes) -> bool:
    """Set ``caBundle`` on every webhook of one Validating/MutatingWebhookConfiguration.

    A JSON patch whose ``test`` ops pin each webhook's name at its index, so a concurrent
    edit that reorders the list fails the patch instead of writing the wrong entry."""
    want = encode(bundle_pem)
    obj = await api.get(name)
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        if (hook.get("clientConfig") or {}).get("caBundle") != want:
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook["name"]})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle",
                        "value": want})
    if not ops:
        return False
    await api.patch(name, ops, type="json")
    log.info("caBundle set on %s %s (%d webhook(s))", api.resource_name, name, len(ops) // 2)
    return True


async def patch_crd_conversion(api: Api, name: str, bundle_pem: bytes) -> bool:
    """Set ``spec.conversion.webhook.clientConfig.caBundle`` of a CRD (merge patch)."""
    want = encode(bundle_pem)
    obj = await api.get(name)
    conversion = (obj.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        log.warning("CRD %s does not convert by webhook: caBundle not set", name)
        return False
    if ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("caBundle") == want:
        return False
    patch = {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": want}}}}}
    await api.patch(name, patch, type="merge")
    log.info("caBundle set on CRD %s", name)
    return True


async def publish(client: Client, bundle_pem: bytes, *, validating: tuple[str, ...],
                  mutating: tuple[str, ...], crds: tuple[str, ...]) -> int:
    """Patch every named target; the number of objects changed."""
    changed = 0
    vwc = client.api("validatingwebhookconfigurations.admissionregistration.k8s.io", None)
    mwc = client.api("mutatingwebhookconfigurations.admissionregistration.k8s.io", None)
    crd = client.api("customresourcedefinitions.apiextensions.k8s.io", None)
    for name in validating:
        changed += await patch_webhook_configuration(vwc, name, bundle_pem)
    for name in mutating:
        changed += await patch_webhook_configuration(mwc, name, bundle_pem)
    for name in crds:
        changed += await patch_crd_conversion(crd, name, bundle_pem)
    return changed
