"""Prometheus metrics, read from the live health objects at scrape time.

The watcher and controller only keep plain counters; this collector turns them into metric
families when /metrics is scraped, so the hot paths never touch prometheus_client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from watchkeeper.cache import Store
from watchkeeper.controller import Controller
from watchkeeper.controller.leadership import Elector, ElectorHealthView, elector_health
from watchkeeper.leader import LeaderElector
from watchkeeper.sharding import ShardReplica
from watchkeeper.supervisor import Supervisor, TaskState
from watchkeeper.watcher import WatchHealth, WatchState

if TYPE_CHECKING:  # (wk.webhooks is imported on first use: most operators serve none)
    from watchkeeper.webhooks import WebhookServer

STATE_VALUE = {WatchState.STARTING: 0, WatchState.HEALTHY: 1, WatchState.DEGRADED: 2}
TASK_STATE_VALUE = {TaskState.DONE: 0, TaskState.RUNNING: 1, TaskState.DEGRADED: 2,
                    TaskState.FAILED: 3}
#: ``ElectorState`` values (watchkeeper.leader, duck-typed here) as gauge values.
ELECTOR_STATE_VALUE = {"starting": 0, "following": 1, "leading": 2, "degraded": 3}



def lease_name(elector: LeaderElector | Elector) -> str:
    """The lease an elector holds: a ``LeaderElector``'s name, or a custom ``Elector``'s
    ``name`` attribute if it has one."""
    if isinstance(elector, LeaderElector):
        return elector.name
    return str(getattr(elector, "name", "?"))

@dataclass
class Sources:
    """What the collector and the probes read."""

    watches: list[tuple[WatchHealth, Store | None, float | None]] = field(default_factory=list)
    controllers: list[Controller] = field(default_factory=list)
    electors: list[LeaderElector] = field(default_factory=list)
    #: id(elector) -> (unready_after, max_unhealthy) for electors no controller runs
    elector_limits: dict[int, tuple[float | None, float | None]] = field(
        default_factory=dict)
    supervisors: list[Supervisor] = field(default_factory=list)  # besides controllers' own
    shards: list[ShardReplica] = field(default_factory=list)  # sharded controllers' rings
    webhooks: list[WebhookServer] = field(default_factory=list)

    def all_supervisors(self) -> Iterator[Supervisor]:
        yield from self.supervisors
        for c in self.controllers:
            if c.supervisor is not None:
                yield c.supervisor

    def all_electors(self) -> Iterator[tuple[LeaderElector | Elector, Controller | None]]:
        """Each elector once, with the controller that runs it (None: added on its own); a
        controller's may be any ``Elector``, so its name and leadership are read if present."""
        seen: set[int] = set()
        runs = {id(c.elector): c for c in self.controllers if c.elector is not None}
        for e in (*self.electors, *(c.elector for c in self.controllers)):
            if e is not None and id(e) not in seen:
                seen.add(id(e))
                yield e, runs.get(id(e))

    def all_watches(self) -> Iterator[tuple[WatchHealth, Store | None, float | None]]:
        """Each watch once: triggers of several controllers may share one (SharedWatches)."""
        seen: set[int] = set()
        for health, store, limit in self.watches:
            seen.add(id(health))
            yield health, store, limit
        for c in self.controllers:
            for t in c.triggers:
                if id(t.health) not in seen:
                    seen.add(id(t.health))
                    yield t.health, t.store, t.config.max_unhealthy


def _webhook_metrics(servers: list[WebhookServer]) -> Iterator[Metric]:
    """Reviews per handler path: requests, denials, errors (raised or timed out), latency;
    and the reviews in flight per server."""
    labels = ["path", "type"]
    requests = CounterMetricFamily("watchkeeper_webhook_requests",
                                   "Reviews answered, per handler", labels=labels)
    denials = CounterMetricFamily("watchkeeper_webhook_denials",
                                  "Admission reviews denied (conversion: never)", labels=labels)
    errors = CounterMetricFamily(
        "watchkeeper_webhook_errors",
        "Reviews whose handler raised or timed out (a failed conversion)", labels=labels)
    latency = HistogramMetricFamily("watchkeeper_webhook_duration_seconds",
                                    "Time to answer a review, per handler", labels=labels)
    in_flight = GaugeMetricFamily("watchkeeper_webhook_in_flight",
                                  "Reviews being answered", labels=["server"])
    for server in servers:
        in_flight.add_metric([server.url], server.in_flight)
        handlers = [(p, "mutating" if h.mutating else "validating", h.stats)
                    for p, h in server.admission.items()]
        handlers += [(p, "conversion", h.stats) for p, h in server.conversions.items()]
        for path, kind, st in handlers:
            requests.add_metric([path, kind], st.requests)
            denials.add_metric([path, kind], st.denials)
            errors.add_metric([path, kind], st.errors)
            latency.add_metric([path, kind], st.cumulative(), st.latency_sum)
    yield from (requests, denials, errors, latency, in_flight)


def _shard_metrics(replicas: list[ShardReplica]) -> Iterator[Metric]:
    """The ring (live shards) and this replica's share, per sharded controller."""
    live = GaugeMetricFamily("watchkeeper_shard_live_shards",
                             "Live shards of the ring, as this replica observes their leases",
                             labels=["ring"])
    member = GaugeMetricFamily("watchkeeper_shard_member",
                               "1 for each live shard of the ring", labels=["ring", "shard"])
    owned = GaugeMetricFamily("watchkeeper_shard_owned_objects",
                              "Objects this replica owns (its cache of the primary resource)",
                              labels=["ring", "shard"])
    draining = GaugeMetricFamily("watchkeeper_shard_draining_objects",
                                 "Objects this replica is handing over", labels=["ring", "shard"])
    sharder = GaugeMetricFamily("watchkeeper_sharder",
                                "1 while this replica is the ring's sharder", labels=["ring"])
    writes = CounterMetricFamily("watchkeeper_sharder_label_writes",
                                 "Label writes by this replica's sharder, by kind "
                                 "(assign, drain, reassign, child)", labels=["ring", "kind"])
    events = CounterMetricFamily("watchkeeper_sharder_watch_events",
                                 "Watch events (metadata only, every object) this replica's "
                                 "sharder received while it was the sharder", labels=["ring"])
    failures = CounterMetricFamily("watchkeeper_sharder_write_failures",
                                   "Label writes by this replica's sharder that failed (not "
                                   "conflicts): each is retried with backoff", labels=["ring"])
    forgotten = CounterMetricFamily("watchkeeper_sharder_dead_leases_deleted",
                                    "Leases of dead shards this replica's sharder deleted once "
                                    "no object carried their label", labels=["ring"])
    for r in replicas:
        st = r.status()
        live.add_metric([st.ring], len(st.live))
        for shard in st.live:
            member.add_metric([st.ring, shard], 1)
        owned.add_metric([st.ring, st.replica_id], st.owned)
        draining.add_metric([st.ring, st.replica_id], st.draining)
        sharder.add_metric([st.ring], 1 if st.sharder else 0)
        for kind, n in sorted(r.sharder.stats.writes.items()):
            writes.add_metric([st.ring, kind], n)
        events.add_metric([st.ring], r.sharder.stats.events)
        failures.add_metric([st.ring], r.sharder.stats.errors)
        forgotten.add_metric([st.ring], r.sharder.stats.leases_deleted)
    yield from (live, member, owned, draining, sharder, writes, events, failures, forgotten)


class WatchkeeperCollector(Collector):
    def __init__(self, sources: Sources) -> None:
        self.sources = sources

    def _shards(self) -> Iterator[Metric]:
        if self.sources.shards:
            yield from _shard_metrics(self.sources.shards)

    def describe(self) -> list[Metric]:
        return []  # collected lazily; nothing to pre-declare

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "watchkeeper_watch_state", "Watch state: 0 starting, 1 healthy, 2 degraded",
            labels=["resource"],
        )
        errors = CounterMetricFamily(
            "watchkeeper_watch_errors", "Watch failures by error class",
            labels=["resource", "reason"],
        )
        restarts = CounterMetricFamily(
            "watchkeeper_watch_restarts", "Retries after a failure", labels=["resource"]
        )
        relists = CounterMetricFamily(
            "watchkeeper_watch_relists", "Full (re)lists started", labels=["resource"]
        )
        backoff = GaugeMetricFamily(
            "watchkeeper_backoff_seconds", "The last backoff delay chosen", labels=["resource"]
        )
        events = CounterMetricFamily(
            "watchkeeper_watch_events", "Watch events received by type",
            labels=["resource", "type"],
        )
        objects = GaugeMetricFamily(
            "watchkeeper_store_objects", "Objects in the cache", labels=["resource"]
        )
        for health, store, _limit in self.sources.all_watches():
            r = health.resource
            state.add_metric([r], STATE_VALUE[health.state])
            for reason, n in health.errors.items():
                errors.add_metric([r, reason], n)
            restarts.add_metric([r], health.restarts)
            relists.add_metric([r], health.relists)
            backoff.add_metric([r], health.last_backoff)
            for kind, n in health.events.items():
                events.add_metric([r, kind], n)
            if store is not None:
                objects.add_metric([r], len(store))
        yield from (state, errors, restarts, relists, backoff, events, objects)

        results = CounterMetricFamily(
            "watchkeeper_reconcile", "Reconciles by result", labels=["controller", "result"]
        )
        durations = HistogramMetricFamily(
            "watchkeeper_reconcile_duration_seconds", "Reconcile durations",
            labels=["controller"],
        )
        depth = GaugeMetricFamily(
            "watchkeeper_queue_depth", "Pending reconcile requests", labels=["controller"]
        )
        failing = GaugeMetricFamily(
            "watchkeeper_reconcile_failing_objects",
            "Objects whose last reconcile failed", labels=["controller"],
        )
        mapper_errors = CounterMetricFamily(
            "watchkeeper_mapper_errors", "Errors raised by a trigger's mapper (skipped)",
            labels=["controller", "trigger"],
        )
        for c in self.sources.controllers:
            name = c.triggers[0].name
            failing.add_metric([name], len(c.stats.failing))
            for t in c.triggers:
                if t.mapper is not None:
                    mapper_errors.add_metric([name, t.name], t.mapper_errors.count)
            for result, n in c.results.items():
                results.add_metric([name, result], n)
            h = c.durations
            cumulative, buckets = 0, []
            for bound, n in zip((*h.BUCKETS, float("inf")), h.counts, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            durations.add_metric([name], buckets, h.total)
            depth.add_metric([name], c.queue_depth)
        yield from (results, durations, depth, failing, mapper_errors)

        task_state = GaugeMetricFamily(
            "watchkeeper_task_state",
            "Supervised task state: 0 done, 1 running, 2 degraded (restarting), 3 failed",
            labels=["supervisor", "task"],
        )
        task_restarts = CounterMetricFamily(
            "watchkeeper_task_restarts", "Restarts of a supervised task after a crash",
            labels=["supervisor", "task"],
        )
        for sup in self.sources.all_supervisors():
            for st in sup.statuses():
                task_state.add_metric([sup.name, st.name], TASK_STATE_VALUE[st.state])
                task_restarts.add_metric([sup.name, st.name], st.restarts)
        yield from (task_state, task_restarts)

        leader = GaugeMetricFamily(
            "watchkeeper_leader", "1 while this replica holds the lease", labels=["lease"]
        )
        election_state = GaugeMetricFamily(
            "watchkeeper_leader_election_state",
            "Elector state: 0 starting, 1 following, 2 leading, 3 degraded (retrying)",
            labels=["lease"],
        )
        election_failures = CounterMetricFamily(
            "watchkeeper_leader_election_failures",
            "Failed attempts to acquire, renew or check the lease, by error class",
            labels=["lease", "error"],
        )
        consecutive = GaugeMetricFamily(
            "watchkeeper_leader_election_consecutive_failures",
            "Failed attempts since the last successful one (0 while the lease is reachable)",
            labels=["lease"],
        )
        for e, _controller in self.sources.all_electors():
            name = lease_name(e)
            leader.add_metric([name], 1 if getattr(e, "is_leader", False) else 0)
            eh: ElectorHealthView | None = elector_health(e)
            if eh is None:
                continue
            state_name = str(getattr(eh.state, "value", eh.state))
            election_state.add_metric([name], ELECTOR_STATE_VALUE.get(state_name, -1))
            for error, n in getattr(eh, "errors", {}).items():
                election_failures.add_metric([name, error], n)
            consecutive.add_metric([name], eh.consecutive_failures)
        yield from (leader, election_state, election_failures, consecutive)
        yield from self._shards()
        if self.sources.webhooks:
            yield from _webhook_metrics(self.sources.webhooks)
        up = GaugeMetricFamily("watchkeeper_scrape_timestamp_seconds", "Time of this scrape")
        up.add_metric([], time.time())
        yield up
