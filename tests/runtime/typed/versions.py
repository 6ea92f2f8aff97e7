"""Two (and three) versions of one resource with conversions between them, as a user
writes them: v1 is the storage version (the hub), v1alpha1 and v1beta1 convert to and
from it."""

from __future__ import annotations

from typing import Literal

import watchkeeper as wk

GROUP = "versions.example.com"


class SpecV1alpha1(wk.Schema):
    image: str
    replicas: int = 1
    debug: bool = False
    """Only v1alpha1 has it: v1 keeps it in an annotation."""


class SpecV1(wk.Schema):
    image: str
    replicas: int = 1
    tier: Literal["free", "standard", "premium"] = "standard"
    """Only v1 has it: v1alpha1 keeps it in an annotation."""


class SpecV1beta1(wk.Schema):
    image: str
    size: int = 1
    """v1beta1 calls replicas ``size``."""


class Status(wk.Schema):
    ready: int = 0


@wk.custom_resource(group=GROUP, version="v1alpha1", kind="Site", served=True,
                    storage=False, deprecated=True,
                    deprecation_warning="versions.example.com/v1alpha1 Site is deprecated; "
                                        "use v1")
class SiteV1alpha1(wk.CustomResource):
    spec: SpecV1alpha1
    status: Status | None = None


@wk.custom_resource(group=GROUP, version="v1beta1", kind="Site", storage=False)
class SiteV1beta1(wk.CustomResource):
    spec: SpecV1beta1
    status: Status | None = None


@wk.custom_resource(group=GROUP, version="v1", kind="Site", storage=True)
class SiteV1(wk.CustomResource):
    spec: SpecV1
    status: Status | None = None


@wk.conversion(SiteV1alpha1, SiteV1)
def alpha_to_v1(old: SiteV1alpha1) -> SiteV1:
    return SiteV1(spec=SpecV1(image=old.spec.image, replicas=old.spec.replicas),
                  status=old.status)


@wk.conversion(SiteV1, SiteV1alpha1)
def v1_to_alpha(new: SiteV1) -> SiteV1alpha1:
    return SiteV1alpha1(spec=SpecV1alpha1(image=new.spec.image, replicas=new.spec.replicas),
                        status=new.status)


@wk.conversion(SiteV1beta1, SiteV1)
def beta_to_v1(old: SiteV1beta1) -> SiteV1:
    return SiteV1(spec=SpecV1(image=old.spec.image, replicas=old.spec.size), status=old.status)


@wk.conversion(SiteV1, SiteV1beta1)
def v1_to_beta(new: SiteV1) -> SiteV1beta1:
    return SiteV1beta1(spec=SpecV1beta1(image=new.spec.image, size=new.spec.replicas),
                       status=new.status)
