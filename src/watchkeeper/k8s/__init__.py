"""Built-in kinds as classes (``wk.k8s.Deployment``, ``Service``, ``ConfigMap``, ``Secret``,
``Pod``, ``Job`` and every type they contain), generated from kube-apiserver's OpenAPI v3
documents by scripts/gen_k8s_models.py: ``client.api(wk.k8s.Deployment)`` is a
``TypedApi[Deployment]``."""

from watchkeeper.k8s._base import K8sObject, Kind, KindIdentity
from watchkeeper.k8s._models import *  # noqa: F403
from watchkeeper.k8s._models import __all__ as _models

__all__ = ["K8sObject", "Kind", "KindIdentity", *_models]
