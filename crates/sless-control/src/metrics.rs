//! Prometheus metrics (docs/architecture.md, "Observability"), exposed in the text format at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of an invocation count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InvocationLabels {
    /// The namespace.
    pub namespace: String,
    /// The function.
    pub function: String,
    /// What made the call: `invoke`, `http`, `cron`, `job`.
    pub trigger: String,
    /// `ok`, `error`, `timeout`, `oom`, `crash`, `rejected`.
    pub outcome: String,
}

/// Labels naming a function.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FunctionLabels {
    /// The namespace.
    pub namespace: String,
    /// The function.
    pub function: String,
}

/// Labels of the instance gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstanceLabels {
    /// The namespace.
    pub namespace: String,
    /// The function.
    pub function: String,
    /// `idle` or `busy`.
    pub state: String,
}

/// Labels of the build count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// `succeeded` or `failed`.
    pub outcome: String,
}

/// Labels of the HTTP edge's read timeout count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadTimeoutLabels {
    /// What came too slowly: `head` (the connection was closed) or `body` (answered 408).
    pub part: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms … ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn build_histogram() -> Histogram {
    // 50 ms … ~27 min.
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// Every series sless exports.
pub struct Metrics {
    registry: Registry,
    /// `sless_invocations_total{namespace,function,trigger,outcome}`.
    pub invocations: Family<InvocationLabels, Counter>,
    /// `sless_invocation_duration_seconds{namespace,function}`.
    pub invocation_duration: HistogramFamily<FunctionLabels>,
    /// `sless_cold_starts_total{namespace,function}`.
    pub cold_starts: Family<FunctionLabels, Counter>,
    /// `sless_instances{namespace,function,state}`.
    pub instances: Family<InstanceLabels, Gauge>,
    /// `sless_builds_total{outcome}`.
    pub builds: Family<BuildLabels, Counter>,
    /// `sless_build_duration_seconds`.
    pub build_duration: Histogram,
    /// `sless_invocation_records_dropped_total`: records lost because the log was full or
    /// its database failed.
    pub records_dropped: Counter,
    /// `sless_http_connections`: HTTP connections open now (at most `--max-connections`).
    pub http_connections: Gauge,
    /// `sless_http_connections_refused_total`: connections over `--max-connections`, answered
    /// 503 and closed.
    pub http_connections_refused: Counter,
    /// `sless_http_read_timeouts_total{part}`: requests whose head or body came too slowly.
    pub http_read_timeouts: Family<ReadTimeoutLabels, Counter>,
}

impl Metrics {
    /// Creates and registers every series.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sless");
        let invocations = Family::<InvocationLabels, Counter>::default();
        registry.register("invocations", "Function calls by source and outcome", invocations.clone());
        let invocation_duration: HistogramFamily<FunctionLabels> = Family::new_with_constructor(latency_histogram);
        registry.register("invocation_duration_seconds", "Duration of function calls", invocation_duration.clone());
        let cold_starts = Family::<FunctionLabels, Counter>::default();
        registry.register("cold_starts", "Calls that started an instance", cold_starts.clone());
        let instances = Family::<InstanceLabels, Gauge>::default();
        registry.register("instances", "Running instances by state", instances.clone());
        let builds = Family::<BuildLabels, Counter>::default();
        registry.register("builds", "Builds by outcome", builds.clone());
        let build_duration = build_histogram();
        registry.register("build_duration_seconds", "Duration of builds", build_duration.clone());
        let records_dropped = Counter::default();
        registry.register("invocation_records_dropped", "Invocation records not stored", records_dropped.clone());
        let http_connections = Gauge::default();
        registry.register("http_connections", "Open HTTP connections", http_connections.clone());
        let http_connections_refused = Counter::default();
        registry.register(
            "http_connections_refused",
            "HTTP connections over the cap, answered 503",
            http_connections_refused.clone(),
        );
        let http_read_timeouts = Family::<ReadTimeoutLabels, Counter>::default();
        registry.register(
            "http_read_timeouts",
            "Request heads or bodies that came too slowly",
            http_read_timeouts.clone(),
        );
        Metrics {
            registry,
            invocations,
            invocation_duration,
            cold_starts,
            instances,
            builds,
            build_duration,
            records_dropped,
            http_connections,
            http_connections_refused,
            http_read_timeouts,
        }
    }

    /// The Prometheus text exposition of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Labels for a function.
    pub fn function(namespace: &str, function: &str) -> FunctionLabels {
        FunctionLabels { namespace: namespace.into(), function: function.into() }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_design_series() {
        let m = Metrics::new();
        m.invocations
            .get_or_create(&InvocationLabels {
                namespace: "n".into(),
                function: "f".into(),
                trigger: "invoke".into(),
                outcome: "ok".into(),
            })
            .inc();
        m.records_dropped.inc();
        m.invocation_duration.get_or_create(&Metrics::function("n", "f")).observe(0.002);
        m.cold_starts.get_or_create(&Metrics::function("n", "f")).inc();
        m.instances
            .get_or_create(&InstanceLabels { namespace: "n".into(), function: "f".into(), state: "idle".into() })
            .set(2);
        m.builds.get_or_create(&BuildLabels { outcome: "succeeded".into() }).inc();
        m.build_duration.observe(1.5);
        m.http_connections.set(3);
        m.http_connections_refused.inc();
        m.http_read_timeouts.get_or_create(&ReadTimeoutLabels { part: "head".into() }).inc();
        let text = m.encode();
        for series in [
            "sless_invocations_total{namespace=\"n\",function=\"f\",trigger=\"invoke\",outcome=\"ok\"} 1",
            "sless_invocation_records_dropped_total 1",
            "sless_invocation_duration_seconds_count{namespace=\"n\",function=\"f\"} 1",
            "sless_cold_starts_total{namespace=\"n\",function=\"f\"} 1",
            "sless_instances{namespace=\"n\",function=\"f\",state=\"idle\"} 2",
            "sless_builds_total{outcome=\"succeeded\"} 1",
            "sless_build_duration_seconds_count 1",
            "sless_http_connections 3",
            "sless_http_connections_refused_total 1",
            "sless_http_read_timeouts_total{part=\"head\"} 1",
        ] {
            assert!(text.contains(series), "{series} missing from:\n{text}");
        }
    }
}
