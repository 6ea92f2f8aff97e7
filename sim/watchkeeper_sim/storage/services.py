"""What kube-apiserver 1.28 does to a Service besides storing it: defaults, validation of
the common mistakes, cluster IPs and node ports (issue 22, case 3).

Decoding fills the defaults, owned by the writer in managedFields: ``type: ClusterIP``,
``sessionAffinity: None``, each port's ``protocol: TCP`` and ``targetPort`` (= ``port``),
``internalTrafficPolicy: Cluster`` (not for ExternalName), ``externalTrafficPolicy:
Cluster`` for NodePort and LoadBalancer, ``allocateLoadBalancerNodePorts: true`` for
LoadBalancer. The service REST storage then allocates, owned by nobody: ``clusterIP`` and
``clusterIPs`` from the service CIDR (a free address of its upper band first, like the
real allocator; a requested one must be inside and free), ``ipFamilies: [IPv4]`` and
``ipFamilyPolicy: SingleStack`` (a headless Service without a selector gets
``RequireDualStack`` and both families), a ``nodePort`` for every port of a NodePort or
LoadBalancer Service, and ``status: {loadBalancer: {}}``. ``clusterIP: None`` (headless)
stays None. An update that leaves the allocated values out keeps them
(patchAllocatedValues).
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
NONE = "None"


@dataclass(frozen=True)
class Network:
    """The service CIDR (--service-cluster-ip-range) and node port range of a cluster."""

    cidr: str = "10.0.0.0/24"
    node_ports: tuple[int, int] = (30000, 32767)

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.cidr)


def _spec(obj: JSON) -> JSON:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
        obj["spec"] = spec
    return spec


def _ports(spec: JSON) -> list[JSON]:
    ports = spec.get("ports")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def _needs_node_ports(spec: JSON) -> bool:
    kind = spec.get("type")
    return kind == "NodePort" or (kind == "LoadBalancer"
                                  and spec.get("allocateLoadBalancerNodePorts") is not False)


def _needs_cluster_ip(spec: JSON) -> bool:
    return spec.get("type") != "ExternalName"


def defaults(obj: JSON) -> None:
    """SetDefaults_Service (decode time): in place."""
    spec = _spec(obj)
    for key in [k for k, v in spec.items() if v is None]:
        del spec[key]  # Go decodes null into the zero value, which omitempty leaves out
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("sessionAffinity") == "ClientIP":
        spec.setdefault("sessionAffinityConfig", {"clientIP": {"timeoutSeconds": 10800}})
    for port in _ports(spec):
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")


def _port_in_range(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def causes(obj: JSON) -> list[JSON]:
    """ValidateService, the checks a Service body most often trips (before allocation)."""
    spec = _spec(obj)
    out: list[JSON] = []
    kind = spec.get("type")
    if kind not in TYPES:
        allowed = ", ".join(f'"{t}"' for t in TYPES)
        out.append(_status.cause(
            "FieldValueNotSupported",
            f"Unsupported value: {_status.go_quote(str(kind))}: supported values: {allowed}",
            "spec.type"))
    ports = _ports(spec)
    headless = spec.get("clusterIP") == NONE
    if not ports and kind != "ExternalName" and not headless:
        out.append(_status.cause("FieldValueRequired", "Required value", "spec.ports"))
    if kind == "ExternalName" and not spec.get("externalName"):
        out.append(_status.cause("FieldValueRequired", "Required value", "spec.externalName"))
    for i, port in enumerate(ports):
        where = f"spec.ports[{i}]"
        if len(ports) > 1 and not port.get("name"):
            out.append(_status.cause("FieldValueRequired", "Required value", f"{where}.name"))
        if not _port_in_range(port.get("port")):
            out.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {port.get('port')}: must be between 1 and 65535, inclusive",
                f"{where}.port"))
        target = port.get("targetPort")
        if isinstance(target, int) and not _port_in_range(target):
            out.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {target}: must be between 1 and 65535, inclusive",
                f"{where}.targetPort"))
    if headless and kind in ("NodePort", "LoadBalancer"):
        out.append(_status.cause(
            "FieldValueInvalid",
            f"Invalid value: \"None\": may not be set to 'None' for {kind} services",
            "spec.clusterIPs[0]"))
    return out


def carry_over(new: JSON, old: JSON) -> None:
    """patchAllocatedValues: an update that omits what was allocated keeps it."""
    nspec, ospec = _spec(new), old.get("spec") or {}
    if _needs_cluster_ip(ospec) and _needs_cluster_ip(nspec):
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not nspec.get(key) and ospec.get(key):
                nspec[key] = ospec[key]
    if _needs_node_ports(ospec) and _needs_node_ports(nspec):
        old_ports = {(p.get("port"), p.get("protocol")): p.get("nodePort")
                     for p in _ports(ospec)}
        for port in _ports(nspec):
            kept = old_ports.get((port.get("port"), port.get("protocol")))
            if not port.get("nodePort") and kept:
                port["nodePort"] = kept


def update_causes(new: JSON, old: JSON) -> list[JSON]:
    """ValidateServiceUpdate: an allocated cluster IP may not change (file 057)."""
    nspec, ospec = _spec(new), old.get("spec") or {}
    before, after = ospec.get("clusterIPs") or [], nspec.get("clusterIPs") or []
    if before and after and before[0] != after[0] and _needs_cluster_ip(nspec):
        listed = ", ".join(_status.go_quote(str(ip)) for ip in after)
        return [_status.cause("FieldValueInvalid",
                              f"Invalid value: []string{{{listed}}}: may not change once set",
                              "spec.clusterIPs[0]")]
    return []


def _in_use(services: Iterable[JSON], skip_uid: str) -> tuple[set[str], set[int]]:
    ips: set[str] = set()
    ports: set[int] = set()
    for svc in services:
        if (svc.get("metadata") or {}).get("uid") == skip_uid:
            continue
        spec = svc.get("spec") or {}
        ips.update(ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]
                   if isinstance(ip, str) and ip and ip != NONE)
        ports.update(p["nodePort"] for p in _ports(spec) if isinstance(p.get("nodePort"), int))
    return ips, ports


def _free_ip(net: ipaddress.IPv4Network, used: set[str]) -> str | None:
    """A random free address, the upper band first (the allocator keeps the lowest
    min(max(16, size/16), 256) addresses for static requests)."""
    hosts = [str(h) for h in net.hosts()]
    band = min(max(16, len(hosts) // 16), 256)
    for candidates in (hosts[band:], hosts[:band]):
        free = [h for h in candidates if h not in used]
        if free:
            return random.choice(free)
    return None


def allocate(obj: JSON, services: Iterable[JSON], net: Network) -> list[JSON]:
    """Fill in cluster IPs, IP families and node ports (in place); the 422 causes of a
    requested address or port that cannot be had (nothing is changed then)."""
    spec = _spec(obj)
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    used_ips, used_ports = _in_use(services, uid)
    out: list[JSON] = []
    if _needs_cluster_ip(spec):
        out += _allocate_ip(spec, net, used_ips)
        _families(spec)
    if _needs_node_ports(spec):
        out += _allocate_node_ports(spec, net, used_ports)
    return out


def _allocate_ip(spec: JSON, net: Network, used: set[str]) -> list[JSON]:
    wanted = spec.get("clusterIP") or ((spec.get("clusterIPs") or [""])[0])
    if wanted == NONE:
        spec["clusterIP"], spec["clusterIPs"] = NONE, [NONE]
        return []
    if wanted:
        quoted = f"[]string{{{_status.go_quote(str(wanted))}}}"
        problem = ""
        try:
            inside = ipaddress.IPv4Address(str(wanted)) in net.network
        except ValueError:
            inside = False
        if not inside:
            problem = (f"the provided IP ({wanted}) is not in the valid range. The range of "
                       f"valid IPs is {net.cidr}")
        elif wanted in used:
            problem = "provided IP is already allocated"
        if problem:
            return [_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {quoted}: failed to allocate IP {wanted}: {problem}",
                "spec.clusterIPs")]
        ip = str(wanted)
    else:
        free = _free_ip(net.network, used)
        if free is None:
            raise RangeFull("failed to allocate a serviceIP: range is full")
        ip = free
    spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
    return []


def _families(spec: JSON) -> None:
    if spec.get("clusterIP") == NONE and not spec.get("selector"):
        spec.setdefault("ipFamilyPolicy", "RequireDualStack")
        spec.setdefault("ipFamilies", ["IPv4", "IPv6"])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _allocate_node_ports(spec: JSON, net: Network, used: set[int]) -> list[JSON]:
    low, high = net.node_ports
    out: list[JSON] = []
    taken = set(used)
    for i, port in enumerate(_ports(spec)):
        wanted = port.get("nodePort")
        if not wanted:
            continue
        problem = ""
        if not (isinstance(wanted, int) and low <= wanted <= high):
            problem = ("provided port is not in the valid range. The range of valid ports is "
                       f"{low}-{high}")
        elif wanted in taken:
            problem = "provided port is already allocated"
        if problem:
            out.append(_status.cause("FieldValueInvalid", f"Invalid value: {wanted}: {problem}",
                                     f"spec.ports[{i}].nodePort"))
        else:
            taken.add(wanted)
    if out:
        return out
    for port in _ports(spec):
        if not port.get("nodePort"):
            free = [p for p in range(low, high + 1) if p not in taken]
            if not free:
                raise RangeFull("failed to allocate a nodePort: range is full")
            port["nodePort"] = random.choice(free)
            taken.add(port["nodePort"])
    return out


class RangeFull(RuntimeError):
    """No address or port left: the apiserver's 500 "Internal error occurred"."""


def status_on_create(obj: JSON) -> None:
    """The Service strategy's status: an empty load balancer (owned by nobody)."""
    obj["status"] = {"loadBalancer": {}}
