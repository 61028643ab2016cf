"""Prometheus metrics of the planning service (one registry per application)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["PROMETHEUS_CONTENT_TYPE", "ServiceMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
_SLACK_BUCKETS = (-10.0, -5.0, -2.0, -1.0, -0.5, -0.25, -0.1, -0.05, -0.025, -0.01, 0.0,
                  0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
_GAIN_BUCKETS = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.5, 1.0)


class ServiceMetrics:
    """Every metric the service exports.

    Parameters
    ----------
    in_flight, abandoned, clusters, killed, restarts
        Callables read at scrape time: requests in a worker or its queue, of those the
        ones already answered, stored clusters, workers killed for overrunning a
        deadline, and worker restarts (kills and crashes).
    """

    def __init__(self, in_flight: Callable[[], float], abandoned: Callable[[], float],
                 clusters: Callable[[], float], killed: Callable[[], float],
                 restarts: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("npu_place_requests", "HTTP requests by route, method and code",
                                ["route", "method", "code"], registry=r)
        self.latency = Histogram("npu_place_request_seconds",
                                 "Time from receipt of a request to its response, by route",
                                 ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.deadline_slack = Histogram(
            "npu_place_plan_lateness_seconds",
            "Response time minus the requested time limit of plan calls (<= 0: on time)",
            ["route"], buckets=_SLACK_BUCKETS, registry=r)
        self.plans = Counter("npu_place_plans", "Plan answers by status, engine and source "
                             "(solve, greedy-fallback, empty)", ["status", "engine", "source"],
                             registry=r)
        self.improved = Counter("npu_place_cpsat_improved",
                                "Plan answers where CP-SAT beat greedy's objective", registry=r)
        self.gain = Histogram("npu_place_cpsat_gain_ratio",
                              "(objective - greedy objective) / |greedy objective| of auto and "
                              "cpsat answers", buckets=_GAIN_BUCKETS, registry=r)
        self.queue_wait = Histogram("npu_place_queue_wait_seconds",
                                    "Seconds an answered plan waited for its worker",
                                    buckets=_LATENCY_BUCKETS, registry=r)
        self.rejected = Counter("npu_place_rejected", "Requests refused with 503 (saturated, "
                                "queue-timeout, draining)", ["reason"], registry=r)
        self.solve_errors = Counter("npu_place_solve_errors", "Solves that raised or whose "
                                    "worker process died (greedy's plan answered if it "
                                    "existed)", registry=r)
        self.models_reused = Counter(
            "npu_place_cpsat_models_reused",
            "CP-SAT models handed back instead of built, by plan (cluster: a stored "
            "cluster's, stateless: POST /v1/plan) and scope (earlier-session: kept from "
            "an earlier plan of the cluster, this-solve: a step repeated within the solve)",
            ["plan", "scope"], registry=r)
        self.models_built = Counter(
            "npu_place_cpsat_models_built", "CP-SAT models built, by plan (cluster, "
            "stateless)", ["plan"], registry=r)
        self.extender_events_dropped = Counter(
            "npu_place_extender_events_dropped",
            "Volcano allocate/deallocate events dropped for a value outside the importer's "
            "bounds (never stored), by verb and field", ["verb", "field"], registry=r)
        self.delta_tier = Counter("npu_place_cluster_updates",
                                  "Cluster updates by the tier they paid for (values, jobs, "
                                  "structure, full, none)", ["tier"], registry=r)
        g = Gauge("npu_place_inflight_solves", "Solves in flight (queued, running, abandoned)",
                  registry=r)
        g.set_function(in_flight)
        g = Gauge("npu_place_abandoned_solves",
                  "Solves whose request was answered but whose thread still runs", registry=r)
        g.set_function(abandoned)
        g = Gauge("npu_place_clusters", "Stored clusters", registry=r)
        g.set_function(clusters)
        g = Gauge("npu_place_workers_killed", "Workers killed for overrunning a deadline "
                  "(since start)", registry=r)
        g.set_function(killed)
        g = Gauge("npu_place_worker_restarts", "Worker restarts: kills and crashes "
                  "(since start)", registry=r)
        g.set_function(restarts)

    def watch_connections(self, waiting: Callable[[], float], evicted: Callable[[], float],
                          timed_out: Callable[[], float]) -> None:
        """Gauges of the connection guard (:mod:`solver.service.connections`), read at
        scrape time."""
        for name, text, read in (
                ("npu_place_connections_waiting",
                 "Open connections with no request being answered (idle or sending headers)",
                 waiting),
                ("npu_place_connections_evicted",
                 "Connections closed to stay within the connection bound (since start)",
                 evicted),
                ("npu_place_connections_timed_out",
                 "Connections closed for not sending request headers in time (since start)",
                 timed_out)):
            Gauge(name, text, registry=self.registry).set_function(read)

    def count_models(self, models: dict[str, int], stored: bool) -> None:
        """Add one solve's CP-SAT model counts (``carried``, ``within``, ``built``)."""
        plan = "cluster" if stored else "stateless"
        self.models_reused.labels(plan, "earlier-session").inc(int(models.get("carried", 0)))
        self.models_reused.labels(plan, "this-solve").inc(int(models.get("within", 0)))
        self.models_built.labels(plan).inc(int(models.get("built", 0)))

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
