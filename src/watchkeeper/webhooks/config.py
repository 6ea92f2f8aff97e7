"""What the certificate manager manages: names, lifetimes, where the CA bundle goes.

Plain data, no cryptography: a user builds it with or without the ``webhooks`` extra.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

YEAR = dt.timedelta(days=365)


@dataclass(frozen=True)
class Lifetimes:
    """How long certificates live and how early they are replaced."""

    ca: dt.timedelta = 5 * YEAR
    serving: dt.timedelta = YEAR
    rotate_fraction: float = 1 / 3  # replaced when less than this share of its life remains
    overlap: dt.timedelta = dt.timedelta(days=1)  # a bundle change reaches every consumer

    def __post_init__(self) -> None:
        if not 0 < self.rotate_fraction < 1:
            raise ValueError("rotate_fraction must be between 0 and 1")
        if self.serving <= dt.timedelta(0) or self.ca <= dt.timedelta(0):
            raise ValueError("lifetimes must be positive")
        # phases 2-4 must end before A expires, and a serving cert issued late in phase 2
        # under A must not be cut short by A's end (it is capped at A's notAfter)
        if self.ca * self.rotate_fraction <= 2 * self.overlap:
            raise ValueError("the CA's rotation window (ca * rotate_fraction) must exceed "
                             "two overlaps")


@dataclass(frozen=True)
class Identity:
    """Who the serving certificate is for."""

    hosts: tuple[str, ...]
    ca_name: str


@dataclass(frozen=True)
class WebhookCerts:
    """The webhook Service, the Secret that holds its certificates, and the CA bundle's users.

    ``local_hosts`` adds 127.0.0.1 and localhost to the serving cert (local development).
    ``validating``/``mutating``: names of Validating/MutatingWebhookConfigurations; ``crds``:
    names of CRDs whose conversion webhook this server is; each gets ``caBundle`` patched in.
    """

    service: str
    namespace: str
    secret: str = ""  # default: "<service>-tls"
    local_hosts: bool = False
    validating: tuple[str, ...] = ()
    mutating: tuple[str, ...] = ()
    crds: tuple[str, ...] = ()
    lifetimes: Lifetimes = Lifetimes()

    @property
    def secret_name(self) -> str:
        return self.secret or f"{self.service}-tls"

    @property
    def identity(self) -> Identity:
        svc, ns = self.service, self.namespace
        hosts = [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local"]
        if self.local_hosts:
            hosts += ["localhost", "127.0.0.1"]
        return Identity(tuple(hosts), f"{svc}.{ns} webhook CA")
