"""When to issue, rotate and retire certificates: pure rules on the Secret's contents.

A CA rotation never breaks a client that holds either the bundle before it or the bundle
after it, for as long as ``overlap`` lasts after each bundle change:

1. steady: bundle [A], serving cert signed by A;
2. A has less than ``rotate_fraction`` of its life left: B joins the bundle [A, B]; the
   serving cert stays signed by A (a serving rotation now is still issued under A);
3. ``overlap`` later (every consumer has [A, B]): B signs; the serving cert is re-issued;
4. ``overlap`` later (every replica serves the B-signed cert): A leaves the bundle [B].
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from watchkeeper.webhooks import pki
from watchkeeper.webhooks.config import Identity, Lifetimes


@dataclass(frozen=True)
class State:
    """What the Secret holds: the bundle, the signing CA (and the next one), the serving pair."""

    bundle: tuple[bytes, ...]  # CA certificates, PEM, oldest first
    ca_key: bytes  # the signing CA's key (its certificate is the bundle's match)
    next_ca_key: bytes | None  # the key of the CA that will sign after the overlap
    serving: pki.KeyPair
    changed_at: dt.datetime  # when the bundle or the signer last changed

    def __repr__(self) -> str:  # never the keys
        return f"State(bundle={len(self.bundle)} CA(s), changed_at={self.changed_at})"


def _fresh(ident: Identity, now: dt.datetime, lt: Lifetimes) -> State:
    ca = pki.new_ca(ident.ca_name, now, lt.ca)
    serving = pki.new_serving(ca, list(ident.hosts), now, lt.serving)
    return State((ca.cert_pem,), ca.key_pem, None, serving, now)


def plan(state: State | None, ident: Identity, now: dt.datetime,
         lt: Lifetimes) -> tuple[State | None, list[str]]:
    """The state to write (None: nothing to change) and why, one reason per change."""
    if state is None:
        return _fresh(ident, now, lt), ["no certificates yet: new CA and serving cert"]
    bundle = [pki.info(p) for p in state.bundle]
    signer = next((c for c in bundle if pki.key_matches(c, state.ca_key)), None)
    if signer is None or signer.not_after <= now:
        return _fresh(ident, now, lt), ["the signing CA is missing or expired: new CA"]
    reasons: list[str] = []
    new = state
    # the next CA is the one whose key waits in ca-next.key; any other CA is an old one
    nk = state.next_ca_key
    nxt = next((c for c in bundle if c is not signer and nk and pki.key_matches(c, nk)), None)
    since = now - state.changed_at
    if nxt is not None and nk is not None and since >= lt.overlap:
        new = replace(new, ca_key=nk, next_ca_key=None, changed_at=now)
        signer, nxt = nxt, None
        reasons.append("overlap passed: the new CA signs from now on")
    elif nxt is None:
        old = [c for c in bundle if c is not signer]
        if nk is not None:  # its CA left the bundle (an edit by hand): forget the key
            new = replace(new, next_ca_key=None)
            reasons.append("a next CA key without its CA: dropped")
        gone = [c for c in old if since >= lt.overlap or c.not_after <= now]
        if gone:
            keep = tuple(c.pem for c in bundle if c not in gone)
            new = replace(new, bundle=keep, changed_at=now)
            reasons.append(f"overlap passed: {len(gone)} old CA(s) leave the bundle")
        elif signer.remaining_fraction(now) < lt.rotate_fraction:
            ca = pki.new_ca(ident.ca_name, now, lt.ca)
            new = replace(new, bundle=(*new.bundle, ca.cert_pem), next_ca_key=ca.key_pem,
                          changed_at=now)
            reasons.append("the CA nears its end: a new CA joins the bundle")
    serving = _serving_problem(new.serving, signer, ident, now, lt)
    if serving:
        ca = pki.KeyPair(signer.pem, new.ca_key)
        new = replace(new, serving=pki.new_serving(ca, list(ident.hosts), now, lt.serving))
        reasons.append(serving)
    return (new if reasons else None), reasons


def _serving_problem(serving: pki.KeyPair, signer: pki.CertInfo,
                     ident: Identity, now: dt.datetime, lt: Lifetimes) -> str:
    try:
        cert = pki.info(serving.cert_pem)
    except ValueError:
        return "the serving cert is unreadable: re-issued"
    if cert.issuer_key != signer.key_id:
        return "the serving cert is not signed by the signing CA: re-issued"
    if cert.hosts != frozenset(ident.hosts):
        return "the serving cert's names changed: re-issued"
    if cert.remaining_fraction(now) < lt.rotate_fraction:
        return "the serving cert nears its end: re-issued"
    if not pki.key_matches(cert, serving.key_pem):
        return "the serving key does not match its cert: re-issued"
    return ""
