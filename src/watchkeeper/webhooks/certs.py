"""The webhook server's certificates, kept in one Secret that every replica agrees on.

The Secret (type kubernetes.io/tls plus ``ca.crt``, the bundle; ``ca.key`` the signing CA's
key; ``ca-next.key`` during a CA rotation) is the one source of truth. Every replica reads
it, applies the same rules (``rotation``) and writes with optimistic concurrency: a create
that meets AlreadyExists, or an update that meets a Conflict, re-reads and starts over, so
the first writer wins and the others adopt what it wrote.

``cryptography`` (the ``webhooks`` extra) is imported on first use, never at import time.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watchkeeper.client.client import Client
from watchkeeper.client.errors import Conflict, NotFound
from watchkeeper.errors import WatchkeeperError
from watchkeeper.supervisor import Supervisor, TaskHandle
from watchkeeper.webhooks.cabundle import publish
from watchkeeper.webhooks.config import WebhookCerts
from watchkeeper.webhooks.tls import ServingTLS

if TYPE_CHECKING:
    from watchkeeper.webhooks import rotation

log = logging.getLogger("watchkeeper.webhooks")

CHANGED_AT = "watchkeeper.dev/ca-bundle-changed-at"
_ATTEMPTS = 10


class MissingExtra(WatchkeeperError):
    """The ``webhooks`` extra (cryptography) is not installed."""


def _rotation() -> Any:
    """The rotation rules, which need cryptography: imported here so the runtime does not."""
    try:
        from watchkeeper.webhooks import rotation
    except ImportError as exc:  # cryptography, or a piece of it, is missing
        raise MissingExtra(
            "webhook certificates need the cryptography package: "
            "pip install 'watchkeeper[webhooks]'") from exc
    return rotation


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(data: dict[str, str], key: str) -> bytes:
    return base64.b64decode(data.get(key) or "")


class CertificateManager:
    """Keeps the Secret's certificates valid, the TLS context current, the caBundle published.

    ``await ensure()`` once before serving; ``start(supervisor)`` keeps it so (a periodic
    read picks up another replica's rotation within ``interval`` seconds)."""

    def __init__(self, client: Client, config: WebhookCerts, *,
                 clock: Callable[[], dt.datetime] = utcnow, interval: float = 60.0) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.interval = interval
        self.tls = ServingTLS()
        self._rules = _rotation()
        self._secrets = client.api("secrets", config.namespace)
        self._bundle = b""

    @property
    def ca_bundle(self) -> bytes:
        """The CA bundle (PEM) clients must trust: what ``ca.crt`` holds."""
        return self._bundle

    # -- the Secret ----------------------------------------------------------------------

    def _decode(self, secret: dict[str, Any]) -> rotation.State | None:
        data = secret.get("data") or {}
        if not data.get("tls.crt") or not data.get("ca.crt") or not data.get("ca.key"):
            return None
        changed = (secret.get("metadata", {}).get("annotations") or {}).get(CHANGED_AT)
        try:
            changed_at = dt.datetime.fromisoformat(changed) if changed else self.clock()
        except ValueError:
            changed_at = self.clock()
        bundle = tuple(c.pem for c in self._rules.pki.split_bundle(_unb64(data, "ca.crt")))
        nxt = _unb64(data, "ca-next.key") or None
        serving = self._rules.pki.KeyPair(_unb64(data, "tls.crt"), _unb64(data, "tls.key"))
        state: rotation.State = self._rules.State(bundle, _unb64(data, "ca.key"), nxt, serving,
                                                  changed_at)
        return state

    def _encode(self, state: rotation.State, rv: str | None) -> dict[str, Any]:
        data = {"tls.crt": _b64(state.serving.cert_pem), "tls.key": _b64(state.serving.key_pem),
                "ca.crt": _b64(b"".join(state.bundle)), "ca.key": _b64(state.ca_key)}
        if state.next_ca_key:
            data["ca-next.key"] = _b64(state.next_ca_key)
        meta: dict[str, Any] = {
            "name": self.config.secret_name, "namespace": self.config.namespace,
            "annotations": {CHANGED_AT: state.changed_at.isoformat()},
            "labels": {"app.kubernetes.io/managed-by": "watchkeeper"}}
        if rv is not None:
            meta["resourceVersion"] = rv
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": meta, "data": data}

    async def ensure(self) -> rotation.State:
        """Read the Secret, write what the rules change (first writer wins), load the result."""
        name = self.config.secret_name
        for _ in range(_ATTEMPTS):
            try:
                secret: dict[str, Any] | None = await self._secrets.get(name)
            except NotFound:
                secret = None
            current = self._decode(secret) if secret is not None else None
            new, reasons = self._rules.plan(current, self.config.identity, self.clock(),
                                            self.config.lifetimes)
            if new is None:
                assert current is not None
                return self._load(current)
            try:
                if secret is None:
                    await self._secrets.create(self._encode(new, None))
                else:
                    rv = secret["metadata"]["resourceVersion"]
                    await self._secrets.replace(name, self._encode(new, rv))
            except Conflict:  # AlreadyExists too: another replica wrote first; adopt it
                log.debug("secret %s/%s written by another replica: re-reading",
                          self.config.namespace, name)
                continue
            log.info("webhook certificates in %s/%s: %s", self.config.namespace, name,
                     "; ".join(reasons))
            return self._load(new)
        raise WatchkeeperError(f"secret {self.config.namespace}/{name}: still conflicting "
                               f"after {_ATTEMPTS} attempts")

    def _load(self, state: rotation.State) -> rotation.State:
        self._bundle = b"".join(state.bundle)
        if self.tls.update(state.serving.cert_pem, state.serving.key_pem):
            log.info("serving certificate loaded: %s",
                     self._rules.pki.summary(state.serving.cert_pem))
        return state

    async def publish(self) -> int:
        """Patch the CA bundle into the configured webhook configurations and CRDs."""
        c = self.config
        return await publish(self.client, self._bundle, validating=c.validating,
                             mutating=c.mutating, crds=c.crds)

    # -- the loop ------------------------------------------------------------------------

    async def sync(self) -> None:
        """One round: the Secret, the TLS context, the caBundle."""
        await self.ensure()
        await self.publish()

    async def run(self) -> None:
        """``sync`` every ``interval`` seconds, forever."""
        while True:
            await self.sync()
            await asyncio.sleep(self.interval)

    def start(self, supervisor: Supervisor, name: str = "webhook-certs") -> TaskHandle:
        """Run the loop under ``supervisor``; a failed round is retried with backoff."""
        return supervisor.spawn(name, self.run, restart="backoff")
