"""Many distinct, realistic Pods from the small corpus a real control plane made.

``benchmarks/data/pods.json.xz`` holds ~1,400 Pods of 300 Deployments exactly as a real
kube-apiserver 1.28.7 listed them (``benchmarks/make_pod_corpus.py``). ``synthesize`` turns
them into any number of distinct Pods that look like those of many more Deployments: each
synthetic Deployment copies one corpus ReplicaSet's Pods under a new Deployment name, a new
pod-template-hash and ReplicaSet uid (also inside managedFields' ``k:{"uid":...}`` key), and
each Pod gets a new name (the real 5-character suffix alphabet), uid, projected token
volume name and creation time. Everything else (spec, defaults, managedFields, status) stays
as the real server wrote it, so the JSON size and shape per Pod are the corpus's.

The replacements are done on each corpus Pod's JSON text in one regex pass, so a new name
can never be rewritten again by a later replacement.
"""

from __future__ import annotations

import json
import lzma
import random
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

CORPUS = Path(__file__).resolve().parent / "data" / "pods.json.xz"
# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated names and template hashes
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TIME = r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"'
_ACCESS = re.compile(r"kube-api-access-[a-z0-9]{5}")


@dataclass
class _Template:
    text: str  # the corpus Pod's JSON
    pattern: re.Pattern[str]
    deploy: str
    rs: str
    hash: str
    rs_uid: str
    name: str
    uid: str
    access: str
    namespace: str


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    """The corpus Pods (LIST items: no kind, no apiVersion)."""
    items: list[dict[str, Any]] = json.loads(lzma.decompress(path.read_bytes()))["items"]
    return items


def _template(pod: dict[str, Any]) -> _Template:
    meta = pod["metadata"]
    owner = meta["ownerReferences"][0]
    rs, hash_ = owner["name"], meta["labels"]["pod-template-hash"]
    text = json.dumps(pod, separators=(",", ":"))
    found = _ACCESS.search(text)
    access = found.group(0) if found else "kube-api-access-none"
    deploy = rs[: -len(hash_) - 1]
    literals = [meta["name"], meta["uid"], owner["uid"], access, rs, deploy, hash_,
                meta["namespace"]]
    # longest first: the pod name wins over the ReplicaSet name it starts with, and so on
    alternatives = [re.escape(s) for s in sorted(set(literals), key=len, reverse=True)]
    pattern = re.compile("|".join([_TIME, *alternatives]))
    return _Template(text, pattern, deploy, rs, hash_, owner["uid"], meta["name"],
                     meta["uid"], access, meta["namespace"])


def _rand(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def synthesize(corpus: list[dict[str, Any]], count: int, namespace: str,
               seed: int = 25, now: float | None = None) -> Iterator[dict[str, Any]]:
    """``count`` distinct Pods in ``namespace``, ReplicaSet by ReplicaSet of the corpus,
    round-robin, until ``count`` (~20,000 Deployments for 100,000 Pods)."""
    rng = random.Random(seed)
    now = time.time() if now is None else now
    groups: dict[str, list[_Template]] = {}
    for item in corpus:
        t = _template(item)
        groups.setdefault(t.rs_uid, []).append(t)
    sets = list(groups.values())
    made = 0
    d = 0
    while made < count:
        group = sets[d % len(sets)]
        first = group[0]
        stem, _, num = first.deploy.rpartition("-")
        deploy = f"{stem}-{d:05d}" if num.isdigit() and stem else f"{first.deploy}-{d}"
        hash_ = _rand(rng, 10)
        rs = f"{deploy}-{hash_}"
        rs_uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        born = now - rng.uniform(60, 90 * 86400)
        for t in group:
            if made >= count:
                break
            stamp = time.strftime('"%Y-%m-%dT%H:%M:%SZ"', time.gmtime(born + rng.uniform(0, 5)))
            new = {t.name: f"{rs}-{_rand(rng, 5)}",
                   t.uid: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                   t.rs_uid: rs_uid, t.access: f"kube-api-access-{_rand(rng, 5)}",
                   t.rs: rs, t.deploy: deploy, t.hash: hash_, t.namespace: namespace}

            def sub(m: re.Match[str], new: dict[str, str] = new, stamp: str = stamp) -> str:
                s = m.group(0)
                return stamp if s[0] == '"' else new[s]

            pod: dict[str, Any] = msgspec.json.decode(t.pattern.sub(sub, t.text))
            made += 1
            yield pod
        d += 1
